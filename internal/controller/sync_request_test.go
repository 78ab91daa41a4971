package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/driftless/driftless/api/v1alpha1"
)

func syncWithAnnotations(annotations map[string]string) *v1alpha1.Sync {
	return &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "ns", Annotations: annotations}}
}

func TestARequestedAtChangeWakesTheSyncControllerAndOtherMetadataDoesNot(t *testing.T) {
	at := FormatRequestedAt(time.Date(2026, 11, 30, 9, 0, 0, 5, time.UTC))
	later := FormatRequestedAt(time.Date(2026, 11, 30, 9, 1, 0, 0, time.UTC))
	tests := []struct {
		name     string
		old, new map[string]string
		want     bool
	}{
		{"a first request passes", nil, map[string]string{RequestedAtAnnotation: at}, true},
		{"a new request passes", map[string]string{RequestedAtAnnotation: at}, map[string]string{RequestedAtAnnotation: later}, true},
		{"the same request again does not pass", map[string]string{RequestedAtAnnotation: at}, map[string]string{RequestedAtAnnotation: at, "x": "y"}, false},
		{"another annotation does not pass", nil, map[string]string{"team": "a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := event.UpdateEvent{ObjectOld: syncWithAnnotations(tt.old), ObjectNew: syncWithAnnotations(tt.new)}
			if got := requestedAtChanged.Update(e); got != tt.want {
				t.Errorf("predicate passed = %v, want %v", got, tt.want)
			}
		})
	}
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
	rec := func(sec int, msg string) v1alpha1.SyncRecord {
		return v1alpha1.SyncRecord{StartedAt: metav1.NewTime(time.Date(2026, 11, 30, 9, 0, sec, 0, time.UTC)), Message: msg}
	}
	old := rec(1, "old")
	tests := []struct {
		name    string
		history []v1alpha1.SyncRecord
		want    string
	}{
		{"no history is no answer", nil, ""},
		{"the record seen before the request is no answer", []v1alpha1.SyncRecord{old}, ""},
		{"a record that started earlier is no answer", []v1alpha1.SyncRecord{rec(5, "early"), old}, ""},
		{"a record that started in the request's second answers", []v1alpha1.SyncRecord{rec(10, "same second"), old}, "same second"},
		{"a record that started later answers", []v1alpha1.SyncRecord{rec(12, "later"), old}, "later"},
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
func TestARequestedSyncIsRecordedEvenWhenNothingChanged(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "initial", map[string]string{"config.yaml": configMap("app", "v1")})
	h.createSync("fleet", nil)
	h.expectReady(h.reconcile("fleet"))
	if n := len(h.reconcile("fleet").Status.History); n != 1 {
		t.Fatalf("an interval with nothing new recorded a sync: %d history records, want 1", n)
	}

	s := h.syncNow("fleet")
	before := s.Status.History[0]
	requested := time.Now()
	patch := client.MergeFrom(s.DeepCopy())
	s.SetAnnotations(map[string]string{RequestedAtAnnotation: FormatRequestedAt(requested)})
	if err := c.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
	s = h.reconcile("fleet")
	if n := len(s.Status.History); n != 2 {
		t.Fatalf("the requested sync was not recorded: %d history records, want 2", n)
	}
	handled := HandledRecord(s, requested, &before)
	if handled == nil || handled.Result != v1alpha1.ResultSucceeded || handled.Unchanged != 1 {
		t.Errorf("handled record = %+v, want a success that compared the one object", handled)
	}
}
