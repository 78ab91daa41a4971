package controller

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/source"
)

// changedPriority is the queue priority of a woken Sync whose paths
// changed (or may have): above the default 0 of every other reconcile, so
// that a push to one app of a repository that a thousand Syncs read
// applies that app first, and the Syncs that only record the new
// revision follow.
const changedPriority = 10

// WakeUp is one Sync woken by a notice (Options.Wake).
type WakeUp struct {
	// Sync is the woken Sync, as the waker read it.
	Sync *v1alpha1.Sync
	// Notice is when the notice arrived: the Sync is synced at what its
	// ref points to after that, and any ls-remote of that ref started
	// after it answers for every Sync the notice woke, however apart
	// their wake-ups reach the controller. Zero is when the controller
	// reads the wake-up.
	Notice time.Time
}

// wakeGap is how long a batch of wake-ups waits for more: a push notice
// hands its Syncs over one by one, and the batch resolves each
// repository's ref once for all of them. A notice whose wake-ups come in
// two batches still costs one ls-remote: the second batch takes the
// answer of the first's, which started after the notice (WakeUp.Notice).
const (
	wakeGap      = 20 * time.Millisecond
	wakeMaxBatch = time.Second
	// wakeOrderTimeout bounds the ls-remote and fetch that ordering a
	// batch costs; past it, the rest of the batch is enqueued unordered.
	wakeOrderTimeout = 30 * time.Second
)

// wakeSource is the Sync controller's source of wake-ups (Options.Wake).
// It enqueues woken Syncs whose paths changed at the revision their ref
// now points to ahead of the others (see wakePriorities). It never delays
// the sender: events are read at once and ordered in the background.
type wakeSource struct {
	r    *SyncReconciler
	wake <-chan WakeUp
}

func (w *wakeSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	var (
		mu      sync.Mutex
		pending []WakeUp
		ready   = make(chan struct{}, 1)
	)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e, open := <-w.wake:
				if !open {
					return
				}
				if e.Sync == nil {
					continue
				}
				if e.Notice.IsZero() {
					e.Notice = time.Now()
				}
				mu.Lock()
				pending = append(pending, e)
				mu.Unlock()
				select {
				case ready <- struct{}{}:
				default:
				}
			}
		}
	}()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-ready:
			}
			// Gather the rest of the notice's Syncs.
			deadline := time.Now().Add(wakeMaxBatch)
			for n := -1; time.Now().Before(deadline); {
				mu.Lock()
				m := len(pending)
				mu.Unlock()
				if m == n {
					break
				}
				n = m
				select {
				case <-ctx.Done():
					return
				case <-time.After(wakeGap):
				}
			}
			mu.Lock()
			batch := pending
			pending = nil
			mu.Unlock()
			syncs := make([]*v1alpha1.Sync, len(batch))
			for i, e := range batch {
				syncs[i] = e.Sync
			}
			enqueueWoken(q, syncs, w.r.wakePriorities(ctx, batch))
		}
	}()
	return nil
}

// enqueueWoken adds syncs to q, each at its priority when q is a priority
// queue; the others in the order given.
func enqueueWoken(q workqueue.TypedRateLimitingInterface[reconcile.Request], syncs []*v1alpha1.Sync, priorities []int) {
	pq, isPriority := q.(priorityqueue.PriorityQueue[reconcile.Request])
	for _, first := range []bool{true, false} {
		for i, s := range syncs {
			if (priorities[i] > 0) != first {
				continue
			}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)}
			if isPriority {
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priorities[i])}, req)
			} else {
				q.Add(req)
			}
		}
	}
}

// wakePriorities returns the queue priority of each woken Sync:
// changedPriority when its paths changed at the revision its ref points
// to now, or when that cannot be told (no render of its paths to compare
// with, a render that read more than its paths, an error); 0 when the
// sync will only record the new revision. Each repository and ref is
// resolved once, and fetched once, for the whole batch, by an ls-remote
// that started after the latest notice among the batch's Syncs of it (one
// that an earlier batch started will do); the syncs that follow find the
// revision in the mirror. Priorities only order the queue: every woken
// Sync is synced.
func (r *SyncReconciler) wakePriorities(ctx context.Context, batch []WakeUp) []int {
	ctx, cancel := context.WithTimeout(ctx, wakeOrderTimeout)
	defer cancel()
	type resolved struct {
		req      source.Request
		revision string
		err      error
	}
	sources := map[string]*resolved{}
	priorities := make([]int, len(batch))
	// Each Sync's source, "" when nothing is asked of it, and the latest
	// notice of each source.
	ids := make([]string, len(batch))
	whos := make([]identity, len(batch))
	since := map[string]time.Time{}
	for i, e := range batch {
		priorities[i] = changedPriority
		s := e.Sync
		if checkSpec(s, r.Identities.tenancy()) != nil {
			// Refused (a host --tenant-source-hosts does not allow, a
			// file:// URL): its sync says why; nothing is asked of its
			// source here either.
			continue
		}
		g, err := json.Marshal(s.Spec.Source)
		if err != nil {
			continue
		}
		who, err := r.identityOf(s)
		if err != nil {
			continue
		}
		// Credentials and trusted keys are read from the Sync's
		// namespace, as the Sync: the source is the namespace's, the
		// identity's and the spec's.
		ids[i], whos[i] = s.Namespace+"\x00"+who.name+"\x00"+string(g), who
		notice := e.Notice
		if newSync(s) {
			notice = later(notice, existsSince(s))
		}
		if notice.After(since[ids[i]]) {
			since[ids[i]] = notice
		}
	}
	for i, e := range batch {
		s, id := e.Sync, ids[i]
		if id == "" {
			continue
		}
		key := client.ObjectKeyFromObject(s)
		inputs, hasInputs := r.Store.Inputs(key, s.UID, s.Generation)
		res, seen := sources[id]
		if !seen {
			res = &resolved{}
			if res.req, res.err = engine.SourceRequest(ctx, readerOf(r.Identities, r.Reader, s, whos[i]), s); res.err == nil {
				res.revision, res.err = r.Mirror().ResolveSince(ctx, res.req, since[id])
			}
			sources[id] = res
		}
		if res.err != nil {
			continue
		}
		r.wokenAt(s, res.revision)
		if !hasInputs {
			continue
		}
		if res.revision == s.Status.LastAppliedRevision {
			priorities[i] = 0
			continue
		}
		digest, known, err := r.Mirror().PathsDigest(ctx, res.req, res.revision, s.Spec.Paths)
		if err != nil || !known {
			continue
		}
		if digest == inputs {
			priorities[i] = 0
		}
	}
	for _, res := range sources {
		if res.err != nil {
			log.FromContext(ctx).V(1).Info("cannot tell which woken Syncs changed; they are synced in any order", "error", res.err)
		}
	}
	return priorities
}

// wokenRevisionTTL is how long the revision a wake-up resolved stands in
// for the woken Sync's own ls-remote.
const wokenRevisionTTL = time.Minute

// wokenRevision is what the ref of a woken Sync pointed to when its
// wake-up was ordered: an answer at least as new as the push notice.
type wokenRevision struct {
	generation int64
	revision   string
	at         time.Time
}

// wokenAt notes that s's ref pointed to revision after the notice that
// woke it, so that its sync does not ask the remote again.
func (r *SyncReconciler) wokenAt(s *v1alpha1.Sync, revision string) {
	r.woken.Store(client.ObjectKeyFromObject(s), wokenRevision{generation: s.Generation, revision: revision, at: r.now()})
}
