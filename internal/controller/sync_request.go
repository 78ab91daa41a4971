package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driftless/driftless/api/v1alpha1"
)

// requestPending reports whether the Sync has a sync request that no
// recorded sync has handled yet: the newest history record started before
// it. status.history keeps startedAt to the second, so a sync that started
// in the same second as the request counts as before it: a request may be
// handled twice, never not at all.
func requestPending(s *v1alpha1.Sync) bool {
	at, ok := v1alpha1.RequestedAt(s)
	if !ok {
		return false
	}
	return len(s.Status.History) == 0 || s.Status.History[0].StartedAt.Time.Before(at)
}

// requestedAtChanged passes updates that change RequestedAtAnnotation, so
// that a request wakes a controller that otherwise reconciles on spec
// changes only.
var requestedAtChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld != nil && e.ObjectNew != nil && requestValue(e.ObjectOld) != requestValue(e.ObjectNew)
	},
}

func requestValue(obj client.Object) string {
	return obj.GetAnnotations()[v1alpha1.RequestedAtAnnotation]
}
