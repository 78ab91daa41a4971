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
// sharedResolveAge before, and after the Sync existed (existsSince).
func (r *SyncReconciler) resolve(ctx context.Context, s *v1alpha1.Sync, req source.Request) (string, error) {
	if v, ok := r.woken.LoadAndDelete(client.ObjectKeyFromObject(s)); ok {
		w := v.(wokenRevision)
		if w.generation == s.Generation && r.now().Sub(w.at) < wokenRevisionTTL {
			return w.revision, nil
		}
	}
	since := time.Now()
	if newSync(s) {
		since = later(since.Add(-sharedResolveAge), existsSince(s))
	}
	return r.Mirror().ResolveSince(ctx, req, since)
}

// existsSince is a time after which s certainly existed: the second after
// its creationTimestamp, which counts whole seconds. A new Sync's first
// sync acts on no ls-remote that started before it: a commit pushed just
// before the Sync was created, naming a path only that commit adds, would
// otherwise fail the render ("path not found") until the next interval.
// (Later syncs, a spec change's among them, ask for an ls-remote that
// starts after they do.)
func existsSince(s *v1alpha1.Sync) time.Time {
	return s.CreationTimestamp.Add(time.Second)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// newSync reports whether s was never synced (no record of a sync, no
// generation observed) and nobody asked for this sync: which second before
// its creation a commit landed in is chance, as for an interval. Every
// later sync — the interval, a spec change, a reconcile request, a retry —
// asks git anew.
func newSync(s *v1alpha1.Sync) bool {
	return s.Status.ObservedGeneration == 0 && len(s.Status.History) == 0 && !requestPending(s)
}
