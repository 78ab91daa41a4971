package controller

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/driftless/driftless/api/v1alpha1"
)

func TestTwoSyncsDeclaringOneObjectConflictAndNothingIsTaken(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "two teams", map[string]string{
		"a/shared.yaml": configMap("shared", "from-a"),
		"b/shared.yaml": configMap("shared", "from-b"),
		"b/own.yaml":    configMap("b-own", "b"),
	})
	h.createSync("team-a", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"a"} })
	h.createSync("team-b", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"b"} })
	h.expectReady(h.reconcile("team-a"))

	s := h.reconcile("team-b")
	h.expectFailed(s, v1alpha1.ReasonConflict, "ConfigMap/"+h.ns+"/shared", "b/shared.yaml",
		"belongs to Sync "+h.ns+"/team-a", "Sync "+h.ns+"/team-b declares it too")
	if get(t, "v1", "ConfigMap", h.ns, "b-own") != nil {
		t.Error("team-b's own ConfigMap was applied although its sync was refused")
	}
	shared := get(t, "v1", "ConfigMap", h.ns, "shared")
	if got := shared.GetLabels()[v1alpha1.SyncLabel]; got != h.ns+".team-a" {
		t.Errorf("shared is labelled %q, want team-a's", got)
	}
	if got := shared.Object["data"].(map[string]any)["key"]; got != "from-a" {
		t.Errorf("shared data = %v, want team-a's", got)
	}
	eventsFor(t, h.ns, "team-b", "Sync "+h.ns+"/team-a")

	// team-b gives it up: its sync goes through, and team-a keeps it.
	h.repo.Commit(t, "b gives it up", map[string]string{"b/shared.yaml": ""})
	h.expectReady(h.reconcile("team-b"))
	if get(t, "v1", "ConfigMap", h.ns, "b-own") == nil {
		t.Error("team-b's own ConfigMap was not applied once the conflict was gone")
	}
}

func TestObjectsWithoutALabelAreAdoptedAndTheAdoptionIsRecorded(t *testing.T) {
	h := newHarness(t)
	// Made by hand (or by Flux v1): no driftless label.
	hand := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: h.ns}, Data: map[string]string{"key": "old"}}
	if err := c.Create(context.Background(), hand); err != nil {
		t.Fatal(err)
	}
	h.repo.Commit(t, "take it over", map[string]string{
		"legacy.yaml": configMap("legacy", "new"),
		"fresh.yaml":  configMap("fresh", "x"),
	})
	h.createSync("fleet", nil)
	s := h.reconcile("fleet")
	h.expectReady(s)
	legacy := get(t, "v1", "ConfigMap", h.ns, "legacy")
	if got := legacy.GetLabels()[v1alpha1.SyncLabel]; got != h.ns+".fleet" {
		t.Errorf("legacy is labelled %q, want the Sync's", got)
	}
	if s.Status.History[0].Adopted != 1 {
		t.Errorf("history records %d adopted, want 1: %+v", s.Status.History[0].Adopted, s.Status.History[0])
	}
	if msg := ready(s).Message; !strings.Contains(msg, "adopted 1 object(s)") || !strings.Contains(msg, "ConfigMap/"+h.ns+"/legacy") {
		t.Errorf("Ready message does not name the adoption: %s", msg)
	}
	eventsFor(t, h.ns, "fleet", "adopted 1 object(s)")

	// Adopted objects are the Sync's: removed from git, they are pruned.
	h.repo.Commit(t, "drop it", map[string]string{"legacy.yaml": ""})
	h.expectReady(h.reconcile("fleet"))
	if get(t, "v1", "ConfigMap", h.ns, "legacy") != nil {
		t.Error("an adopted object removed from git was not pruned")
	}
}

func TestSelfHealOffAppliesASpecChangeAfterAFailedAttempt(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "two dirs", map[string]string{
		"a/one.yaml": configMap("one", "1"),
		"b/two.yaml": configMap("two", "2"),
	})
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"a"}
		s.Spec.SelfHeal = ptr.To(false)
	})
	h.expectReady(h.reconcile("fleet"))

	// The spec changes, and the next attempt fails: git is away.
	s := h.syncNow("fleet")
	s.Spec.Paths = []string{"a", "b"}
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	away := h.repo.Bare + ".away"
	if err := os.Rename(h.repo.Bare, away); err != nil {
		t.Fatal(err)
	}
	h.expectFailed(h.reconcile("fleet"), v1alpha1.ReasonFetchFailed)
	if err := os.Rename(away, h.repo.Bare); err != nil {
		t.Fatal(err)
	}

	// Git is back: the new spec is applied, not merely compared.
	s = h.reconcile("fleet")
	h.expectReady(s)
	if get(t, "v1", "ConfigMap", h.ns, "two") == nil {
		t.Fatalf("the spec change was never applied; Ready: %s", ready(s).Message)
	}
	if s.Status.LastAppliedGeneration != s.Generation {
		t.Errorf("lastAppliedGeneration = %d, want %d", s.Status.LastAppliedGeneration, s.Generation)
	}
}
