package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
)

// webDeployment is a Deployment that takes its environment from the
// generated ConfigMap web-config.
const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 0
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        envFrom:
        - configMapRef:
            name: web-config
`

// overlay is a base, a component and a production overlay that puts them
// in namespace ns with a greeting.
func overlay(ns, greeting string) map[string]string {
	return map[string]string{
		"apps/web/base/kustomization.yaml":             "resources: [deployment.yaml]\nconfigMapGenerator:\n- name: web-config\n  literals: [GREETING=hello]\n",
		"apps/web/base/deployment.yaml":                webDeployment,
		"apps/web/components/quota/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [quota.yaml]\n",
		"apps/web/components/quota/quota.yaml":         "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: web\nspec:\n  hard: {pods: \"10\"}\n",
		"apps/web/overlays/production/kustomization.yaml": fmt.Sprintf(`namespace: %s
namePrefix: prod-
resources: [../../base]
components: [../../components/quota]
configMapGenerator:
- name: web-config
  behavior: merge
  literals: [GREETING=%s]
patches:
- path: replicas.yaml
`, ns, greeting),
		"apps/web/overlays/production/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n",
	}
}

// configMapOf returns the name of the ConfigMap the Deployment's first
// container takes its environment from.
func configMapOf(t *testing.T, deploy *unstructured.Unstructured) string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	envFrom, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "envFrom")
	name, _, _ := unstructured.NestedString(envFrom[0].(map[string]any), "configMapRef", "name")
	return name
}

func TestSyncAppliesAKustomizeOverlay(t *testing.T) {
	h := newHarness(t)
	first := h.repo.Commit(t, "overlay", overlay(h.ns, "welcome"))
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps/web/overlays/production"} })

	s := h.reconcile("shop")
	h.expectReady(s)
	deploy := get(t, "apps/v1", "Deployment", h.ns, "prod-web")
	if deploy == nil {
		t.Fatal("Deployment prod-web not created")
	}
	if replicas, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas"); replicas != 2 {
		t.Errorf("replicas = %d, want 2 from the overlay's patch", replicas)
	}
	if got, want := deploy.GetAnnotations()[v1alpha1.OriginAnnotation],
		"apps/web/overlays/production/kustomization.yaml → apps/web/base/deployment.yaml@"+first[:7]; got != want {
		t.Errorf("origin = %q, want %q", got, want)
	}
	oldConfig := configMapOf(t, deploy)
	if !strings.HasPrefix(oldConfig, "prod-web-config-") {
		t.Fatalf("Deployment takes its environment from %q, want the generated prod-web-config-<hash>", oldConfig)
	}
	cm := get(t, "v1", "ConfigMap", h.ns, oldConfig)
	if cm == nil {
		t.Fatalf("ConfigMap %s the Deployment names was not created", oldConfig)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "GREETING"); got != "welcome" {
		t.Errorf("GREETING = %q, want the overlay's welcome", got)
	}
	if get(t, "v1", "ResourceQuota", h.ns, "prod-web") == nil {
		t.Error("the component's ResourceQuota prod-web was not created")
	}

	// A new greeting is a new ConfigMap, which the Deployment follows; the
	// old one is pruned.
	h.repo.Commit(t, "greet", overlay(h.ns, "bonjour"))
	h.expectReady(h.reconcile("shop"))
	deploy = get(t, "apps/v1", "Deployment", h.ns, "prod-web")
	newConfig := configMapOf(t, deploy)
	if newConfig == oldConfig || get(t, "v1", "ConfigMap", h.ns, newConfig) == nil {
		t.Errorf("Deployment takes its environment from %q after the change, want a new ConfigMap that exists", newConfig)
	}
	if get(t, "v1", "ConfigMap", h.ns, oldConfig) != nil {
		t.Errorf("old ConfigMap %s not pruned", oldConfig)
	}

	// A kustomization naming a missing file fails the build, and nothing
	// of that revision is written.
	broken := overlay(h.ns, "hola")
	broken["apps/web/overlays/production/replicas.yaml"] = ""
	h.repo.Commit(t, "lose the patch", broken)
	s = h.reconcile("shop")
	h.expectFailed(s, v1alpha1.ReasonBuildFailed,
		"apps/web/overlays/production/kustomization.yaml", `patches entry "replicas.yaml" not found`)
	if got := configMapOf(t, get(t, "apps/v1", "Deployment", h.ns, "prod-web")); got != newConfig {
		t.Errorf("Deployment takes its environment from %q after a failed build, want %q still", got, newConfig)
	}

	// A remote base is refused, and spec.kustomize.allowRemote reaches the
	// render, which fetches it: here from a port where nothing listens.
	remote := overlay(h.ns, "hola")
	const k = "apps/web/overlays/production/kustomization.yaml"
	remote[k] = strings.Replace(remote[k], "resources: [../../base]", `resources: [../../base, "https://127.0.0.1:1/example/fleet//base?ref=v1"]`, 1)
	h.repo.Commit(t, "remote base", remote)
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonBuildFailed, "spec.kustomize.allowRemote is off")
	s = h.reconcile("shop")
	s.Spec.Kustomize = &v1alpha1.KustomizeSpec{AllowRemote: true}
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonBuildFailed, k, `resources entry "https://127.0.0.1:1/example/fleet//base?ref=v1" cannot be fetched`)
}
