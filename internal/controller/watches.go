package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/driftless/driftless/internal/drift"
)

// Watches runs one metadata-only watch per kind that Syncs manage. The
// manager's cache selects on the driftless.dev/sync label, so nothing
// unmanaged is watched or cached, and only metadata is kept. A kind's
// watch runs while some Sync holds objects of it (Ensure) and is stopped
// when the last one lets go (its objects of that kind pruned, or the
// Sync gone: Release).
type Watches struct {
	// mu guards the fields below; the cache's informers are added and
	// removed under it, and read (reader) under its read lock.
	mu    sync.RWMutex
	ctrl  controller.TypedController[drift.Request]
	cache cache.Cache
	kinds map[schema.GroupVersionKind]bool
	// held is the kinds each Sync holds (the last Ensure of it), and
	// holders how many Syncs hold each kind.
	held    map[client.ObjectKey]map[schema.GroupVersionKind]bool
	holders map[schema.GroupVersionKind]int
	// started is closed once the drift controller has started: a source
	// added before then is started by the controller itself, which would
	// race with this package's wait for it.
	started <-chan struct{}
	// starting holds kinds whose watch is being started.
	starting map[schema.GroupVersionKind]bool
	// refused holds kinds whose watch did not list in time, and when the
	// next sync may try again (see refusal).
	refused map[schema.GroupVersionKind]refusal
	// syncTimeout bounds the wait for a new watch's first list
	// (watchSyncTimeout unless a test sets it).
	syncTimeout time.Duration
	// starts counts the watches started, stops those stopped, for tests.
	starts, stops int
	// writes is what the agent's own writes returned: those are not
	// drift, whatever field manager anyone else names.
	writes *drift.Writes
	// cluster is the remote cluster (clusterKey) whose objects cache
	// holds, "" for the agent's own: its requests name it.
	cluster string
}

// remote returns watches of the same drift controller over c, the cache
// of the remote cluster key.
func (w *Watches) remote(c cache.Cache, key string) *Watches {
	r := newWatches(w.ctrl, c, w.started, w.writes)
	r.syncTimeout, r.cluster = w.syncTimeout, key
	return r
}

func newWatches(ctrl controller.TypedController[drift.Request], c cache.Cache, started <-chan struct{}, writes *drift.Writes) *Watches {
	return &Watches{ctrl: ctrl, cache: c, kinds: map[schema.GroupVersionKind]bool{},
		held: map[client.ObjectKey]map[schema.GroupVersionKind]bool{}, holders: map[schema.GroupVersionKind]int{},
		started: started, starting: map[schema.GroupVersionKind]bool{}, refused: map[schema.GroupVersionKind]refusal{}, writes: writes}
}

// requestFor is drift.RequestFor, naming the cluster of w.
func (w *Watches) requestFor(gvk schema.GroupVersionKind, obj *metav1.PartialObjectMetadata) (drift.Request, bool) {
	req, ok := drift.RequestFor(gvk, obj)
	req.Cluster = w.cluster
	return req, ok
}

// watchSyncTimeout bounds the wait for a new watch's first list; a kind
// whose watch has not listed by then is refused for a back-off of
// refusedFirst, doubling up to refusedMax.
const (
	watchSyncTimeout = 30 * time.Second
	refusedFirst     = 30 * time.Second
	refusedMax       = 10 * time.Minute
)

// refusal is a kind whose watch did not list: no sync waits for it again
// before next.
type refusal struct {
	next    time.Time
	backoff time.Duration
	err     error
}

// nextRefusal is the back-off after a watch that did not list, given the
// one before (zero for the first): refusedFirst, doubling up to
// refusedMax.
func nextRefusal(before time.Duration) time.Duration {
	if before <= 0 {
		return refusedFirst
	}
	return min(2*before, refusedMax)
}

// Ensure records that the Sync key holds objects of exactly the kinds
// gvks, stops the watches of kinds no Sync holds any more, starts a
// watch for each kind of gvks not yet watched and waits (briefly) until
// it has listed; since is when the caller's sync began, so that an
// object someone else wrote after that is checked as soon as it is listed.
// The kinds are started and listed at the same time. A kind that cannot
// be watched (RBAC, a broken conversion webhook, an aggregated API that
// fails) is reported, and is not waited for again until its back-off
// (30 s doubling to 10 min) has passed: the syncs in between go on at once
// and say it is not watched. It does not hold up other kinds. The wait
// ends when ctx is cancelled (the agent stopping), not when its deadline
// passes (a sync whose health wait used up its timeout still starts its
// watches).
func (w *Watches) Ensure(ctx context.Context, key client.ObjectKey, gvks []schema.GroupVersionKind, since time.Time) error {
	w.mu.Lock()
	w.holdLocked(key, gvks)
	w.mu.Unlock()
	waitCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	defer stop()
	errs := make([]error, len(gvks))
	var wg sync.WaitGroup
	now := time.Now()
	for i, gvk := range gvks {
		w.mu.Lock()
		watched := w.kinds[gvk] || w.starting[gvk]
		refused, backingOff := w.refused[gvk]
		backingOff = backingOff && now.Before(refused.next)
		if !watched && !backingOff {
			w.starting[gvk] = true
			w.starts++
		}
		w.mu.Unlock()
		if backingOff {
			errs[i] = fmt.Errorf("%s is not watched (%v): its drift is corrected at the interval; next try at %s",
				gvk.Kind, refused.err, refused.next.UTC().Format(time.RFC3339))
			continue
		}
		if watched {
			continue
		}
		wg.Go(func() {
			err := w.start(waitCtx, gvk, since)
			w.mu.Lock()
			delete(w.starting, gvk)
			next := time.Time{}
			switch {
			case err == nil && w.holders[gvk] == 0:
				// Let go of while it started.
				w.removeLocked(gvk)
			case err == nil:
				w.kinds[gvk] = true
				delete(w.refused, gvk)
			case waitCtx.Err() == nil:
				// Refused, not stopped: back off.
				r := refusal{backoff: nextRefusal(w.refused[gvk].backoff), err: err}
				r.next = time.Now().Add(r.backoff)
				w.refused[gvk], next = r, r.next
			}
			w.mu.Unlock()
			if err != nil {
				if !next.IsZero() {
					err = fmt.Errorf("%w; next try at %s", err, next.UTC().Format(time.RFC3339))
				}
				errs[i] = fmt.Errorf("watch %s: %w", gvk, err)
				return
			}
			ctrl.LoggerFrom(ctx).Info("watching managed objects for drift", "kind", gvk.String())
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// NotWatched words each kind of gvks whose watch was refused and is not
// running: the kind and why, with no time in it, so that a Sync's
// condition says it and stays the same from one sync to the next while
// the kind stays unwatchable. Sorted; empty when every kind is watched.
func (w *Watches) NotWatched(gvks []schema.GroupVersionKind) []string {
	if w == nil {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []string
	for _, gvk := range gvks {
		r, refused := w.refused[gvk]
		if !refused || w.kinds[gvk] {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s): %v", gvk.Kind, gvk.GroupVersion(), r.err))
	}
	sort.Strings(out)
	return out
}

// Release records that the Sync key holds nothing any more (it is gone,
// or applies to another cluster) and stops the watches of kinds no Sync
// holds now.
func (w *Watches) Release(key client.ObjectKey) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holdLocked(key, nil)
}

// holdLocked records that key holds the kinds gvks and stops the watches
// of kinds no Sync holds any more; w.mu is held.
func (w *Watches) holdLocked(key client.ObjectKey, gvks []schema.GroupVersionKind) {
	now := make(map[schema.GroupVersionKind]bool, len(gvks))
	for _, gvk := range gvks {
		now[gvk] = true
	}
	before := w.held[key]
	for gvk := range now {
		if !before[gvk] {
			w.holders[gvk]++
		}
	}
	for gvk := range before {
		if now[gvk] {
			continue
		}
		if w.holders[gvk]--; w.holders[gvk] <= 0 {
			delete(w.holders, gvk)
			if w.kinds[gvk] {
				w.removeLocked(gvk)
			}
			// A kind still starting is removed when its start ends.
		}
	}
	if len(now) == 0 {
		delete(w.held, key)
	} else {
		w.held[key] = now
	}
}

// removeLocked stops the watch of gvk and drops its cached objects; w.mu
// is held, so that no reader reads the kind meanwhile (a read of a kind
// the cache has no informer for would start one).
func (w *Watches) removeLocked(gvk schema.GroupVersionKind) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	_ = w.cache.RemoveInformer(context.Background(), obj)
	delete(w.kinds, gvk)
	w.stops++
}

// reader returns what reads the metadata of watched objects from the
// watches' cache: a kind not watched now is not read (it answers
// errNotWatched) rather than started anew by the read.
func (w *Watches) reader() client.Reader {
	return watchedReader{w}
}

// errNotWatched is a read of a kind no drift watch runs for.
var errNotWatched = errors.New("kind not watched")

type watchedReader struct{ w *Watches }

func (r watchedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.w.mu.RLock()
	defer r.w.mu.RUnlock()
	if !r.w.kinds[obj.GetObjectKind().GroupVersionKind()] {
		return errNotWatched
	}
	return r.w.cache.Get(ctx, key, obj, opts...)
}

func (r watchedReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errNotWatched
}

func (w *Watches) start(ctx context.Context, gvk schema.GroupVersionKind, since time.Time) error {
	if w.started != nil {
		select {
		case <-w.started:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.TypedKind(w.cache, obj, w.handler(gvk, since))
	if err := w.ctrl.Watch(src); err != nil {
		return err
	}
	// Until the watch has listed, a change would go unseen.
	timeout := w.syncTimeout
	if timeout <= 0 {
		timeout = watchSyncTimeout
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := src.WaitForSync(syncCtx); err != nil {
		_ = w.cache.RemoveInformer(context.Background(), obj)
		return err
	}
	if syncCtx.Err() != nil {
		_ = w.cache.RemoveInformer(context.Background(), obj)
		return syncCtx.Err()
	}
	return nil
}

// Covers reports whether every kind of gvks is watched.
func (w *Watches) Covers(gvks []schema.GroupVersionKind) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, gvk := range gvks {
		if !w.kinds[gvk] {
			return false
		}
	}
	return true
}

type queue = workqueue.TypedRateLimitingInterface[drift.Request]

func (w *Watches) handler(gvk schema.GroupVersionKind, since time.Time) handler.TypedEventHandler[*metav1.PartialObjectMetadata, drift.Request] {
	return handler.TypedFuncs[*metav1.PartialObjectMetadata, drift.Request]{
		// Creates are what syncs do, and what a new watch lists first;
		// only an object written since the sync began (between its apply
		// and the watch's first list) by someone other than the agent
		// (its resourceVersion is not one the agent's write returned) is
		// checked.
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q queue) {
			if drift.WrittenSince(e.Object.ManagedFields, since.Add(-time.Second)) &&
				!w.writes.Ours(e.Object.UID, e.Object.ResourceVersion) {
				if req, ok := w.requestFor(gvk, e.Object); ok {
					q.Add(req)
				}
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q queue) {
			if e.ObjectOld.ResourceVersion == e.ObjectNew.ResourceVersion ||
				!drift.Relevant(e.ObjectOld.ManagedFields, e.ObjectNew.ManagedFields, w.writes.Ours(e.ObjectNew.UID, e.ObjectNew.ResourceVersion)) {
				return
			}
			if req, ok := w.requestFor(gvk, e.ObjectNew); ok {
				q.Add(req) // the queue folds a burst of edits into one check
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q queue) {
			// Gone, or no longer labelled: what the agent wrote of it is
			// not needed any more (a re-created object has another UID).
			w.writes.Forget(e.Object.UID)
			if req, ok := w.requestFor(gvk, e.Object); ok {
				q.Add(req)
			}
		},
	}
}

// SetupDriftWithManager registers the drift controller and returns the
// watches it runs, which syncs start as their inventories grow.
func SetupDriftWithManager(mgr ctrl.Manager, r *DriftReconciler, concurrency int) (*Watches, error) {
	c, err := controller.NewTyped[drift.Request]("drift", mgr, controller.TypedOptions[drift.Request]{
		Reconciler:              r,
		MaxConcurrentReconciles: concurrency,
	})
	if err != nil {
		return nil, err
	}
	started := make(chan struct{})
	if err := c.Watch(startedSignal(started)); err != nil {
		return nil, err
	}
	w := newWatches(c, mgr.GetCache(), started, r.Store.Writes())
	r.Watches = w
	return w, nil
}

// startedSignal is a source that adds nothing to the queue: the
// controller starts it with its other sources, and it closes started.
type startedSignal chan struct{}

func (s startedSignal) Start(context.Context, queue) error {
	close(s)
	return nil
}
