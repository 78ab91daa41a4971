package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driftless/driftless/api/v1alpha1"
)

// RequestedAtAnnotation asks the agent to sync a Sync now (`driftless
// reconcile`). Its value is the time of the request, RFC 3339 with
// nanoseconds (FormatRequestedAt). A request is handled by the first sync
// that starts after it; that sync always compares every object and is
// always recorded in status.history, even when it finds nothing to do.
const RequestedAtAnnotation = "driftless.dev/requested-at"

// FormatRequestedAt is the value of RequestedAtAnnotation for a request
// made at t.
func FormatRequestedAt(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// RequestedAt returns the time of the Sync's sync request, and false when
// it has none or its value is not a time.
func RequestedAt(obj metav1.Object) (time.Time, bool) {
	v, ok := obj.GetAnnotations()[RequestedAtAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// requestPending reports whether the Sync has a sync request that no
// recorded sync has handled yet: the newest history record started before
// it. status.history keeps startedAt to the second, so a sync that started
// in the same second as the request counts as before it: a request may be
// handled twice, never not at all.
func requestPending(s *v1alpha1.Sync) bool {
	at, ok := RequestedAt(s)
	if !ok {
		return false
	}
	return len(s.Status.History) == 0 || s.Status.History[0].StartedAt.Time.Before(at)
}

// HandledRecord returns the history record of the sync that handled a
// request made at requested: the newest record that started at or after
// it. Like requestPending it compares to the second; a record in
// status.history before the request was made (before) is never taken for
// its answer, so pass the newest record seen before the request, or nil.
func HandledRecord(s *v1alpha1.Sync, requested time.Time, before *v1alpha1.SyncRecord) *v1alpha1.SyncRecord {
	if len(s.Status.History) == 0 {
		return nil
	}
	newest := &s.Status.History[0]
	if before != nil && newest.StartedAt.Equal(&before.StartedAt) && newest.Revision == before.Revision &&
		newest.Duration == before.Duration && newest.Message == before.Message {
		return nil
	}
	if newest.StartedAt.Time.Before(requested.Truncate(time.Second)) {
		return nil
	}
	return newest
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

func requestValue(obj client.Object) string { return obj.GetAnnotations()[RequestedAtAnnotation] }
