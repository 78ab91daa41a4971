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
		starting: map[schema.GroupVersionKind]bool{}, writes: w.writes, cluster: key}
}

// requestFor is drift.RequestFor, naming the cluster of w.
func (w *Watches) requestFor(gvk schema.GroupVersionKind, obj *metav1.PartialObjectMetadata) (drift.Request, bool) {
	req, ok := drift.RequestFor(gvk, obj)
	req.Cluster = w.cluster
	return req, ok
}

// Ensure starts a watch for each kind not yet watched and waits (briefly)
// until it has listed; since is when the caller's sync began, so that an
// object someone else wrote after that is checked as soon as it is listed.
// The kinds are started and listed at the same time. A kind that cannot
// be watched (RBAC, a broken conversion webhook) is reported and retried
// at the next sync; it does not hold up other kinds.
func (w *Watches) Ensure(ctx context.Context, gvks []schema.GroupVersionKind, since time.Time) error {
	errs := make([]error, len(gvks))
	var wg sync.WaitGroup
	for i, gvk := range gvks {
		w.mu.Lock()
		watched := w.kinds[gvk] || w.starting[gvk]
		if !watched {
			w.starting[gvk] = true
		}
		w.mu.Unlock()
		if watched {
			continue
		}
		wg.Go(func() {
			err := w.start(ctx, gvk, since)
			w.mu.Lock()
			delete(w.starting, gvk)
			if err == nil {
				w.kinds[gvk] = true
			}
			w.mu.Unlock()
			if err != nil {
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
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
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
		starting: map[schema.GroupVersionKind]bool{}, writes: r.Store.Writes()}, nil
}
