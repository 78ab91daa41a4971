package controller

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

// A Sync created just after a commit acts on that commit, not on a branch
// head another Sync of the repository resolved a moment before it
// existed: its first sync never reports a path the commit adds as
// missing (which, at a 10-minute interval, would stand for 10 minutes).
func TestANewSyncNeverActsOnAResolutionOlderThanItself(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "first", map[string]string{"apps/app.yaml": configMap("app", "v1")})
	h.createSync("apps", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })
	h.expectReady(h.reconcile("apps"))
	// The Sync of the repository resolves its branch again (its
	// interval), then a commit adds the path a new Sync names.
	h.expectReady(h.reconcile("apps"))
	added := h.repo.Commit(t, "add other", map[string]string{"other/cm.yaml": configMap("other", "v1")})
	h.createSync("other", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"other"} })
	s := h.reconcile("other")
	if cond := ready(s); cond == nil || cond.Status != metav1.ConditionTrue || s.Status.LastAppliedRevision != added {
		t.Fatalf("the new Sync's first sync: Ready %+v at %q, want True at the commit %s that adds its path", cond, s.Status.LastAppliedRevision, added[:7])
	}
	for _, rec := range s.Status.History {
		if rec.Reason == v1alpha1.ReasonBuildFailed {
			t.Errorf("the new Sync recorded %s: %s", rec.Reason, rec.Message)
		}
	}
}

// A mirror removed under the agent (its cache directory emptied) is
// cloned again: the next commit is synced, not FetchFailed until a
// restart.
func TestAMirrorRemovedUnderTheAgentIsClonedAgain(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "first", map[string]string{"app.yaml": configMap("app", "v1")})
	h.createSync("fleet", nil)
	h.expectReady(h.reconcile("fleet"))

	mirrors := filepath.Join(h.r.CacheDir, "mirrors")
	entries, err := os.ReadDir(mirrors)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no mirror in %s after a sync: %v", mirrors, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(mirrors, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	next := h.repo.Commit(t, "second", map[string]string{"app.yaml": configMap("app", "v2")})
	s := h.reconcile("fleet")
	if cond := ready(s); cond == nil || cond.Status != metav1.ConditionTrue || s.Status.LastAppliedRevision != next {
		t.Fatalf("the sync after the mirror was removed: Ready %+v at %q, want True at %s", cond, s.Status.LastAppliedRevision, next[:7])
	}
	if got := configMapValue(t, h.ns, "app", "key"); got != "v2" {
		t.Errorf("ConfigMap app key = %q, want v2 from the new commit", got)
	}
}
