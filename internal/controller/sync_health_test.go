package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// installPhaseCRD installs, as the admin, testenv.PhaseCRD in a group of
// the test's own: a kind Job whose status has only a phase (Pending,
// Running, Failed). It returns the group.
func installPhaseCRD(t *testing.T, ns string) string {
	t.Helper()
	group := "phase" + strings.ReplaceAll(ns, "-", "") + ".example.com"
	crd := testenv.PhaseCRD(group)
	if err := env.InstallCRDs(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	return group
}

// phaseChecks is the health check of docs/ordering-and-health.md for a
// custom resource whose status has only a phase.
func phaseChecks(group string) []v1alpha1.HealthCheck {
	return []v1alpha1.HealthCheck{{APIVersion: group + "/v1", Kind: "Job",
		Current:    "status.phase == 'Running'",
		InProgress: "status.phase == 'Pending'",
		Failed:     "status.phase == 'Failed'"}}
}

// setPhase writes status.phase of the phase Job name through the status
// subresource, as the resource's operator would.
func setPhase(t *testing.T, group, ns, name, phase string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(group + "/v1")
	u.SetKind("Job")
	u.SetNamespace(ns)
	u.SetName(name)
	patch := fmt.Sprintf(`{"status":{"phase":%q}}`, phase)
	if err := c.Status().Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("set status.phase of Job %s/%s to %s: %v", ns, name, phase, err)
	}
}

// startPhaseSync commits a phase Job in wave 0 and a ConfigMap in wave 1,
// creates a Sync with the phase health check and starts its sync, which
// waits for wave 0. It returns the group and the sync's end.
func startPhaseSync(h *harness) (string, <-chan error) {
	h.t.Helper()
	group := installPhaseCRD(h.t, h.ns)
	h.repo.Commit(h.t, "a migration and what needs it", map[string]string{
		"migrate.yaml": fmt.Sprintf("apiVersion: %s/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  image: migrate:1\n", group),
		"after.yaml":   waved(configMap("after", "v1"), "1"),
	})
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		s.Spec.HealthChecks = phaseChecks(group)
		s.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Minute}
	})
	done := make(chan error, 1)
	go func() {
		_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: keyOf(h.ns, "fleet")})
		done <- err
	}()
	eventually(h.t, "the sync to apply wave 0 and wait for it", func() bool {
		p := h.syncNow("fleet").Status.Progress
		return p != nil && p.Wave == 0 && get(h.t, group+"/v1", "Job", h.ns, "migrate") != nil
	})
	return group, done
}

func TestHealthChecksGateAWaveOnACustomResourcesPhase(t *testing.T) {
	h := newHarness(t)
	group, done := startPhaseSync(h)

	setPhase(t, group, h.ns, "migrate", "Pending")
	eventually(t, "the wait to read the Pending phase", func() bool {
		c := apimeta.FindStatusCondition(h.syncNow("fleet").Status.Conditions, v1alpha1.ConditionReconciling)
		return c != nil && strings.Contains(c.Message, "0 of 1 objects healthy")
	})
	if get(t, "v1", "ConfigMap", h.ns, "after") != nil {
		t.Fatal("wave 1 was applied while the Job of wave 0 was Pending")
	}

	setPhase(t, group, h.ns, "migrate", "Running")
	endOfSync(t, done, "the Job was Running")
	h.expectReady(h.syncNow("fleet"))
	if get(t, "v1", "ConfigMap", h.ns, "after") == nil {
		t.Error("wave 1 was not applied once the Job of wave 0 was Running")
	}
}

func TestHealthChecksFailedStopsTheWaveWithTheExpression(t *testing.T) {
	h := newHarness(t)
	group, done := startPhaseSync(h)

	setPhase(t, group, h.ns, "migrate", "Failed")
	endOfSync(t, done, "the Job had Failed")
	s := h.syncNow("fleet")
	h.expectFailed(s, v1alpha1.ReasonHealthCheckFailed,
		"an object failed",
		"Job/"+h.ns+"/migrate is Failed: spec.healthChecks[0].failed is true (status.phase == 'Failed') (migrate.yaml#0)")
	if get(t, "v1", "ConfigMap", h.ns, "after") != nil {
		t.Error("wave 1 was applied after the Job of wave 0 failed")
	}
}

// endOfSync waits for the sync started by startPhaseSync to end, which it
// must once what happened.
func endOfSync(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the sync did not end once %s", what)
	}
}
