package controller

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driftless/driftless/api/v1alpha1"
)

// SetupWithManager registers the reconciler. Syncs are reconciled when
// their spec changes (a new generation), a sync is requested
// (RequestedAtAnnotation) or their hold changes, and then every spec.interval;
// status updates do not trigger a sync. Each event read from wake, when
// it is not nil, reconciles its Sync at once: those whose paths changed
// first (see wakeSource).
func (r *SyncReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, wake <-chan WakeUp) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Sync{}, dependsOnIndex, dependsOnKeys); err != nil {
		return err
	}
	// Every sync reads its Sync's Inventory from the cache: the
	// Inventories' informer starts with the agent's other caches, not
	// on the first sync's path (its LIST and the wait for it took 1.1 s
	// of a first sync of 1,010 objects at load average ~20).
	if _, err := mgr.GetCache().GetInformer(context.Background(), &v1alpha1.Inventory{}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Sync{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, requestedAtChanged, holdChanged))).
		Watches(&v1alpha1.Sync{}, handler.EnqueueRequestsFromMapFunc(r.dependents))
	if wake != nil {
		b = b.WatchesRawSource(&wakeSource{r: r, wake: wake})
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Named("sync").
		Complete(r)
}
