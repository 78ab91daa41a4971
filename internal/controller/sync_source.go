package controller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// sharedResolveAge is how old an ls-remote may be, when it started, for a
// new Sync's first sync to take its answer instead of asking git again:
// a thousand new Syncs of one repository (an agent installed over a fleet,
// a team's Syncs created at once) cost a few dozen ls-remotes instead of
// one each.
const sharedResolveAge = time.Second

// resolve returns the revision s's ref points to: the one its wake-up
// resolved, once, when that was after the notice and s's spec did not
// change since; otherwise an ls-remote shared with the other Syncs of the
// repository (source.Mirror.ResolveSince): one that started after it
// asked, or for a new Sync's first sync one that started at most
// sharedResolveAge before.
func (r *SyncReconciler) resolve(ctx context.Context, s *v1alpha1.Sync, req source.Request) (string, error) {
	if v, ok := r.woken.LoadAndDelete(client.ObjectKeyFromObject(s)); ok {
		w := v.(wokenRevision)
		if w.generation == s.Generation && r.now().Sub(w.at) < wokenRevisionTTL {
			return w.revision, nil
		}
	}
	since := time.Now()
	if newSync(s) {
		since = since.Add(-sharedResolveAge)
	}
	return r.Mirror().ResolveSince(ctx, req, since)
}

// newSync reports whether s was never synced (no record of a sync, no
// generation observed) and nobody asked for this sync: which second before
// its creation a commit landed in is chance, as for an interval. Every
// later sync — the interval, a spec change, a reconcile request, a retry —
// asks git anew.
func newSync(s *v1alpha1.Sync) bool {
	return s.Status.ObservedGeneration == 0 && len(s.Status.History) == 0 && !requestPending(s)
}
