package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driftless/driftless/api/v1alpha1"
)

// SetupWithManager registers the reconciler. Syncs are reconciled when
// their spec changes (a new generation) and then every spec.interval;
// status updates do not trigger a sync.
func (r *SyncReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Sync{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Sync{}, handler.EnqueueRequestsFromMapFunc(r.dependents)).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Named("sync").
		Complete(r)
}
