package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/driftless/driftless/internal/drift"
)

// Watches runs one metadata-only watch per kind that Syncs manage. The
// manager's cache selects on the driftless.dev/sync label, so nothing
// unmanaged is watched or cached, and only metadata is kept.
type Watches struct {
	mu    sync.Mutex
	ctrl  controller.TypedController[drift.Request]
	cache cache.Cache
	kinds map[schema.GroupVersionKind]bool
	// starting holds kinds whose watch is being started.
	starting map[schema.GroupVersionKind]bool
	// refused holds kinds whose watch did not list in time, and when the
	// next sync may try again (see refusal).
	refused map[schema.GroupVersionKind]refusal
	// syncTimeout bounds the wait for a new watch's first list
	// (watchSyncTimeout unless a test sets it).
	syncTimeout time.Duration
	// starts counts the watches started, for tests.
	starts int
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
	return &Watches{ctrl: w.ctrl, cache: c, kinds: map[schema.GroupVersionKind]bool{},
		starting: map[schema.GroupVersionKind]bool{}, refused: map[schema.GroupVersionKind]refusal{},
		syncTimeout: w.syncTimeout, writes: w.writes, cluster: key}
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

// Ensure starts a watch for each kind not yet watched and waits (briefly)
// until it has listed; since is when the caller's sync began, so that an
// object someone else wrote after that is checked as soon as it is listed.
// The kinds are started and listed at the same time. A kind that cannot
// be watched (RBAC, a broken conversion webhook, an aggregated API that
// fails) is reported, and is not waited for again until its back-off
// (30 s doubling to 10 min) has passed: the syncs in between go on at once
// and say it is not watched. It does not hold up other kinds. The wait
// ends when ctx is cancelled (the agent stopping), not when its deadline
// passes (a sync whose health wait used up its timeout still starts its
// watches).
func (w *Watches) Ensure(ctx context.Context, gvks []schema.GroupVersionKind, since time.Time) error {
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

func (w *Watches) start(ctx context.Context, gvk schema.GroupVersionKind, since time.Time) error {
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
	w.mu.Lock()
	defer w.mu.Unlock()
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
	return &Watches{ctrl: c, cache: mgr.GetCache(), kinds: map[schema.GroupVersionKind]bool{},
		starting: map[schema.GroupVersionKind]bool{}, refused: map[schema.GroupVersionKind]refusal{}, writes: r.Store.Writes()}, nil
}
