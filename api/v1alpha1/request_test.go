package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func syncWithAnnotations(annotations map[string]string) *Sync {
	return &Sync{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "ns", Annotations: annotations}}
}

func TestARequestedAtValueReadsBackAsTheTimeItWasWrittenFrom(t *testing.T) {
	want := time.Date(2026, 11, 30, 9, 45, 12, 123456789, time.FixedZone("CET", 3600))
	got, ok := RequestedAt(syncWithAnnotations(map[string]string{RequestedAtAnnotation: FormatRequestedAt(want)}))
	if !ok || !got.Equal(want) {
		t.Errorf("RequestedAt = %v, %v; want %v", got, ok, want)
	}
	if _, ok := RequestedAt(syncWithAnnotations(map[string]string{RequestedAtAnnotation: "now please"})); ok {
		t.Error("a value that is not a time reads as a request")
	}
}

func TestTheHandledRecordIsTheFirstThatStartedAfterTheRequest(t *testing.T) {
	req := time.Date(2026, 11, 30, 9, 0, 10, 500, time.UTC)
	rec := func(sec int, msg string) SyncRecord {
		return SyncRecord{StartedAt: metav1.NewTime(time.Date(2026, 11, 30, 9, 0, sec, 0, time.UTC)), Message: msg}
	}
	old := rec(1, "old")
	tests := []struct {
		name    string
		history []SyncRecord
		want    string
	}{
		{"no history is no answer", nil, ""},
		{"the record seen before the request is no answer", []SyncRecord{old}, ""},
		{"a record that started earlier is no answer", []SyncRecord{rec(5, "early"), old}, ""},
		{"a record that started in the request's second answers", []SyncRecord{rec(10, "same second"), old}, "same second"},
		{"a record that started later answers", []SyncRecord{rec(12, "later"), old}, "later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := syncWithAnnotations(nil)
			s.Status.History = tt.history
			got := ""
			if r := HandledRecord(s, req, &old); r != nil {
				got = r.Message
			}
			if got != tt.want {
				t.Errorf("HandledRecord = %q, want %q", got, tt.want)
			}
		})
	}
}

// A sync that finds nothing new is not recorded, so that an interval does
// not churn the Sync; a requested one is, so that `driftless reconcile
// --wait` has an answer.
