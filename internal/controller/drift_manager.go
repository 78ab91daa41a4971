package controller

import (
	"context"
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
	// self is driftless's field manager: its own writes are not drift.
	self string
}

// Ensure starts a watch for each kind not yet watched.
func (w *Watches) Ensure(ctx context.Context, gvks []schema.GroupVersionKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, gvk := range gvks {
		if w.kinds[gvk] {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		src := source.TypedKind(w.cache, obj, w.handler(gvk, time.Now()))
		if err := w.ctrl.Watch(src); err != nil {
			return err
		}
		// Until the watch has listed, a change would go unseen.
		if err := src.WaitForSync(ctx); err != nil {
			return fmt.Errorf("watch %s: %w", gvk, err)
		}
		w.kinds[gvk] = true
		ctrl.LoggerFrom(ctx).Info("watching managed objects for drift", "kind", gvk.String())
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

func (w *Watches) handler(gvk schema.GroupVersionKind, started time.Time) handler.TypedEventHandler[*metav1.PartialObjectMetadata, drift.Request] {
	return handler.TypedFuncs[*metav1.PartialObjectMetadata, drift.Request]{
		// Creates are what syncs do, and what a new watch lists first;
		// only an object someone else wrote since just before the watch
		// started (between the sync's apply and the first list) is checked.
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q queue) {
			if drift.WrittenByOthersSince(e.Object.ManagedFields, w.self, started.Add(-2*time.Second)) {
				if req, ok := drift.RequestFor(gvk, e.Object); ok {
					q.Add(req)
				}
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q queue) {
			if e.ObjectOld.ResourceVersion == e.ObjectNew.ResourceVersion ||
				!drift.Relevant(e.ObjectOld.ManagedFields, e.ObjectNew.ManagedFields, w.self) {
				return
			}
			if req, ok := drift.RequestFor(gvk, e.ObjectNew); ok {
				q.Add(req) // the queue folds a burst of edits into one check
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q queue) {
			if req, ok := drift.RequestFor(gvk, e.Object); ok {
				q.Add(req)
			}
		},
	}
}

// SetupDriftWithManager registers the drift controller and gives syncs
// the watches it starts as inventories grow.
func SetupDriftWithManager(mgr ctrl.Manager, r *DriftReconciler, concurrency int) error {
	c, err := controller.NewTyped[drift.Request]("drift", mgr, controller.TypedOptions[drift.Request]{
		Reconciler:              r,
		MaxConcurrentReconciles: concurrency,
	})
	if err != nil {
		return err
	}
	r.Syncs.Watches = &Watches{ctrl: c, cache: mgr.GetCache(), kinds: map[schema.GroupVersionKind]bool{}, self: "driftless"}
	return nil
}
