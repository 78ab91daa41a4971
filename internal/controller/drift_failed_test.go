package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// A sync that wrote objects of a new kind and then failed its health
// check still watches that kind: a hand edit of such an object is found
// and reverted by a drift check at once, not by the next sync.
func TestObjectsOfANewKindWrittenByAFailedSyncAreWatched(t *testing.T) {
	h := newHarness(t)
	h.tenantMayWriteClusterWide() // its git holds a CRD
	group := "failed" + strings.ReplaceAll(h.ns, "-", "") + ".example.com"
	t.Cleanup(func() {
		if crd := get(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gizmos."+group); crd != nil {
			_ = c.Delete(context.Background(), crd)
		}
	})
	// No kube-controller-manager runs here: the Deployment never becomes
	// available, so the sync ends with HealthCheckFailed.
	h.repo.Commit(t, "a gizmo and a rollout that never finishes", map[string]string{
		"crd.yaml":   testenv.CRDManifest(group, "Gizmo", "gizmos"),
		"gizmo.yaml": fmt.Sprintf("apiVersion: %s/v1\nkind: Gizmo\nmetadata:\n  name: g\nspec:\n  size: 1\n", group),
		"app.yaml":   strings.Replace(deployment(h.ns, "web", "512Mi"), "replicas: 0", "replicas: 1", 1),
	})
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		s.Spec.Wait = true
		s.Spec.Timeout = &metav1.Duration{Duration: 3 * time.Second}
		s.Spec.Interval = metav1.Duration{Duration: time.Hour}
	})
	startAgent(t, false)
	eventually(t, "the sync to fail its health check", func() bool {
		cond := ready(h.syncNow("fleet"))
		return cond != nil && cond.Reason == v1alpha1.ReasonHealthCheckFailed
	})

	gizmo := get(t, group+"/v1", "Gizmo", h.ns, "g")
	_ = unstructured.SetNestedField(gizmo.Object, int64(9), "spec", "size")
	if err := c.Update(context.Background(), gizmo, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a drift check to revert the Gizmo", func() bool {
		for _, inc := range h.syncNow("fleet").Status.Drift {
			if inc.Action == v1alpha1.DriftReverted && strings.HasPrefix(inc.Object, "Gizmo/") {
				return true
			}
		}
		return false
	})
	if size, _, _ := unstructured.NestedInt64(get(t, group+"/v1", "Gizmo", h.ns, "g").Object, "spec", "size"); size != 1 {
		t.Errorf("spec.size = %d, want git's 1", size)
	}
}
