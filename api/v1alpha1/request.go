package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// HandledRecord returns the history record of the sync that handled a
// request made at requested: the newest record that started at or after
// it. It compares to the second, as status.history keeps startedAt; a record in
// status.history before the request was made (before) is never taken for
// its answer, so pass the newest record seen before the request, or nil.
func HandledRecord(s *Sync, requested time.Time, before *SyncRecord) *SyncRecord {
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
