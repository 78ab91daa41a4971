package controller

import (
	"context"
	"testing"
	"time"

	"github.com/driftless/driftless/api/v1alpha1"
)

// driftless reconcile --wait waits for a new history record: a Sync
// stalled on an invalid spec must still record a requested attempt.
func TestARequestedSyncOfAStalledSpecIsRecorded(t *testing.T) {
	h := newHarness(t)
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Source.Git.URL = "file://fileserver/srv/fleet.git" })
	s := h.expectStalledOnSpec("fleet", `file URL with host "fileserver"`)
	if again := h.expectStalledOnSpec("fleet"); len(again.Status.History) != len(s.Status.History) {
		t.Fatalf("a stalled Sync was recorded again without a request: %d records, was %d", len(again.Status.History), len(s.Status.History))
	}

	// The request must be after the last record, to the second.
	time.Sleep(1100 * time.Millisecond)
	s = h.syncNow("fleet")
	s.Annotations = map[string]string{v1alpha1.RequestedAtAnnotation: v1alpha1.FormatRequestedAt(time.Now())}
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	after := h.expectStalledOnSpec("fleet")
	if len(after.Status.History) != len(s.Status.History)+1 {
		t.Errorf("a requested sync of a stalled Sync left %d history records, want %d", len(after.Status.History), len(s.Status.History)+1)
	}
}
