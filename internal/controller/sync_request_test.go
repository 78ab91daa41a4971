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
	at := v1alpha1.FormatRequestedAt(time.Date(2026, 11, 30, 9, 0, 0, 5, time.UTC))
	later := v1alpha1.FormatRequestedAt(time.Date(2026, 11, 30, 9, 1, 0, 0, time.UTC))
	tests := []struct {
		name     string
		old, new map[string]string
		want     bool
	}{
		{"a first request passes", nil, map[string]string{v1alpha1.RequestedAtAnnotation: at}, true},
		{"a new request passes", map[string]string{v1alpha1.RequestedAtAnnotation: at}, map[string]string{v1alpha1.RequestedAtAnnotation: later}, true},
		{"the same request again does not pass", map[string]string{v1alpha1.RequestedAtAnnotation: at}, map[string]string{v1alpha1.RequestedAtAnnotation: at, "x": "y"}, false},
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
	s.SetAnnotations(map[string]string{v1alpha1.RequestedAtAnnotation: v1alpha1.FormatRequestedAt(requested)})
	if err := c.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
	s = h.reconcile("fleet")
	if n := len(s.Status.History); n != 2 {
		t.Fatalf("the requested sync was not recorded: %d history records, want 2", n)
	}
	handled := v1alpha1.HandledRecord(s, requested, &before)
	if handled == nil || handled.Result != v1alpha1.ResultSucceeded || handled.Unchanged != 1 {
		t.Errorf("handled record = %+v, want a success that compared the one object", handled)
	}
}

// Only a new Sync's first sync, not asked for, may take an ls-remote
// another Sync of the repository started within the second; every later
// sync asks git anew.
func TestOnlyANewSyncsFirstSyncSharesARecentLsRemote(t *testing.T) {
	requested := v1alpha1.FormatRequestedAt(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	synced := []v1alpha1.SyncRecord{{StartedAt: metav1.NewTime(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))}}
	tests := []struct {
		name                 string
		generation, observed int64
		annotations          map[string]string
		history              []v1alpha1.SyncRecord
		want                 bool
	}{
		{"a new Sync's first sync", 1, 0, nil, nil, true},
		{"a new Sync edited before its first sync", 2, 0, nil, nil, true},
		{"a new Sync asked to sync", 1, 0, map[string]string{v1alpha1.RequestedAtAnnotation: requested}, nil, false},
		{"the retry of a first sync that failed", 1, 0, nil, synced, false},
		{"an interval", 3, 3, nil, synced, false},
		{"a spec change", 4, 3, nil, synced, false},
		{"a reconcile request", 3, 3, map[string]string{v1alpha1.RequestedAtAnnotation: requested}, synced, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := syncWithAnnotations(tt.annotations)
			s.Generation, s.Status.ObservedGeneration, s.Status.History = tt.generation, tt.observed, tt.history
			if got := newSync(s); got != tt.want {
				t.Errorf("new = %v, want %v", got, tt.want)
			}
		})
	}
}
