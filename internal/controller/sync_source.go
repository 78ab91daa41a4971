package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// releaseWatches lets go of what the Sync key held in the agent's own
// cluster's drift watches (Clusters.Release does so in a remote one).
func (r *SyncReconciler) releaseWatches(key client.ObjectKey) {
	if r.Watches != nil {
		r.Watches.Release(key)
	}
}

// resolve returns the revision s's ref points to: the one its wake-up
// resolved, once, when that was after the notice and s's spec did not
// change since; otherwise an ls-remote (shared, see source.Mirror.Resolve).
func (r *SyncReconciler) resolve(ctx context.Context, s *v1alpha1.Sync, req source.Request) (string, error) {
	if v, ok := r.woken.LoadAndDelete(client.ObjectKeyFromObject(s)); ok {
		w := v.(wokenRevision)
		if w.generation == s.Generation && r.now().Sub(w.at) < wokenRevisionTTL {
			return w.revision, nil
		}
	}
	return r.Mirror().Resolve(ctx, req)
}
