package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

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
