package controller

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// podinfo is the public example repository the test syncs unchanged:
// Stefan Prodan's podinfo (Apache-2.0), pinned by hack/examples/go.mod.
const podinfo = "github.com/stefanprodan/podinfo"

// podinfoCharts are the only files the test adds to the repository: two
// HelmCharts for its chart, one with the chart's own production values
// file and one with its defaults.
var podinfoCharts = map[string]string{
	"driftless/podinfo-prod.yaml": `apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata:
  name: podinfo-prod
spec:
  chart: {path: charts/podinfo}
  valuesFiles: [charts/podinfo/values-prod.yaml]
`,
	"driftless/podinfo-dev.yaml": `apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata:
  name: podinfo-dev
spec:
  chart: {path: charts/podinfo}
`,
}

// kustomizeBuild is what `kustomize build dir` prints, as objects.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return objs
}

// plainFiles is every object of the YAML files in dir, recursively.
func plainFiles(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return err
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// expectApplied fails unless every object of want exists in the cluster
// (a namespaced one without a namespace in ns) with want's labels, and,
// for a Deployment, want's replicas and images.
func expectApplied(t *testing.T, ns string, want []*unstructured.Unstructured) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the build made no objects to look for")
	}
	for _, w := range want {
		namespace := w.GetNamespace()
		if namespace == "" && w.GetKind() != "Namespace" {
			namespace = ns
		}
		got := get(t, w.GetAPIVersion(), w.GetKind(), namespace, w.GetName())
		if got == nil {
			t.Errorf("%s %s/%s of the build is not in the cluster", w.GetKind(), namespace, w.GetName())
			continue
		}
		for k, v := range w.GetLabels() {
			if got.GetLabels()[k] != v {
				t.Errorf("%s %s/%s: label %s = %q, want %q", w.GetKind(), namespace, w.GetName(), k, got.GetLabels()[k], v)
			}
		}
		if w.GetKind() != "Deployment" {
			continue
		}
		wantReplicas, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
		gotReplicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		if wantReplicas != 0 && wantReplicas != gotReplicas {
			t.Errorf("Deployment %s/%s: replicas = %d, want %d", namespace, w.GetName(), gotReplicas, wantReplicas)
		}
		if g, w := images(got), images(w); !slices.Equal(g, w) {
			t.Errorf("Deployment %s/%s: images = %v, want %v", namespace, w, g, w)
		}
	}
}

// images lists a Deployment's container images, and the ConfigMaps its
// volumes mount (so a hash suffix that did not follow shows).
func images(u *unstructured.Unstructured) []string {
	var out []string
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		out = append(out, c.(map[string]any)["image"].(string))
	}
	volumes, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "volumes")
	for _, v := range volumes {
		if name, ok, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name"); ok {
			out = append(out, "configMap:"+name)
		}
	}
	return out
}

// A public repository nobody here wrote — plain manifests, Kustomize
// overlays over bases, and a Helm chart — syncs unchanged, with one
// HelmChart document added: every object is what `kustomize build` and
// the chart with its production values make, drift on a chart object is
// put back, and removing the HelmChart prunes the chart's objects.
func TestAPublicExampleRepositorySyncsUnchanged(t *testing.T) {
	dir := testenv.Example(t, podinfo)
	h := newHarness(t)
	h.tenantMayWriteClusterWide() // its overlays create their Namespaces
	files := testenv.ExampleFiles(t, dir)
	maps.Copy(files, podinfoCharts)
	rev := h.repo.Commit(t, "podinfo at "+filepath.Base(dir)+", and a HelmChart for its chart", files)

	// One Sync per application, as a platform team would set them up. The
	// overlay and the plain app name their own namespaces (production,
	// webapp) and create them.
	syncs := map[string][]string{
		"kustomize":  {"kustomize"},
		"production": {"deploy/overlays/production"},
		"webapp":     {"deploy/webapp"},
		"chart":      {"driftless"},
	}
	for name, paths := range syncs {
		h.createSync(name, func(s *v1alpha1.Sync) {
			s.Spec.Paths = paths
			s.Spec.Interval = metav1.Duration{Duration: time.Hour}
		})
	}
	startAgent(t, false)
	for name := range syncs {
		h.waitReady(name, rev)
	}

	expectApplied(t, h.ns, kustomizeBuild(t, filepath.Join(dir, "kustomize")))
	production := kustomizeBuild(t, filepath.Join(dir, "deploy/overlays/production"))
	expectApplied(t, h.ns, production)
	expectApplied(t, h.ns, plainFiles(t, filepath.Join(dir, "deploy/webapp")))
	var redisConfig string
	for _, o := range production {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "redis-config-") {
			redisConfig = o.GetName()
		}
	}
	if redisConfig == "" || get(t, "v1", "ConfigMap", "production", redisConfig) == nil {
		t.Errorf("the overlay's hashed ConfigMap %q (redis-config-<hash>) is not in namespace production", redisConfig)
	}

	// The chart with its defaults: no HPA, so the chart sets replicas; no Redis.
	dev := get(t, "apps/v1", "Deployment", h.ns, "podinfo-dev")
	if dev == nil {
		t.Fatal("Deployment podinfo-dev of the chart not created")
	}
	if got, _, _ := unstructured.NestedInt64(dev.Object, "spec", "replicas"); got != 1 {
		t.Errorf("podinfo-dev replicas = %d, want 1 (the chart's replicaCount)", got)
	}
	if get(t, "apps/v1", "Deployment", h.ns, "podinfo-dev-redis") != nil {
		t.Error("podinfo-dev has a Redis Deployment; the chart's defaults have none")
	}

	// The chart with values-prod.yaml: the HPA owns replicas, Redis is on,
	// and the memory limit is the production one.
	deploy := get(t, "apps/v1", "Deployment", h.ns, "podinfo-prod")
	if deploy == nil {
		t.Fatal("Deployment podinfo-prod of the chart not created")
	}
	if got := images(deploy); !slices.Equal(got, []string{"ghcr.io/stefanprodan/podinfo:6.9.2"}) {
		t.Errorf("chart Deployment images = %v, want ghcr.io/stefanprodan/podinfo:6.9.2", got)
	}
	if got := memoryLimit(t, deploy); got != "256Mi" {
		t.Errorf("chart memory limit = %s, want 256Mi from values-prod.yaml", got)
	}
	if _, set, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas"); set {
		// The API server defaults replicas to 1; what matters is that the
		// chart left it to the HPA, so driftless does not own the field.
		for _, f := range deploy.GetManagedFields() {
			if f.Manager == "driftless" && strings.Contains(f.FieldsV1.GetRawString(), `"f:replicas"`) {
				t.Error("driftless owns spec.replicas of the chart's Deployment; values-prod.yaml enables the HPA, so the chart sets none")
			}
		}
	}
	chartObjects := [][3]string{
		{"apps/v1", "Deployment", "podinfo-prod-redis"},
		{"v1", "ConfigMap", "podinfo-prod-redis"},
		{"v1", "Service", "podinfo-prod"},
		{"autoscaling/v2", "HorizontalPodAutoscaler", "podinfo-prod"},
	}
	for _, o := range chartObjects {
		if get(t, o[0], o[1], h.ns, o[2]) == nil {
			t.Errorf("%s %s of the chart (values-prod.yaml) not created", o[1], o[2])
		}
	}
	if got := deploy.GetAnnotations()[v1alpha1.OriginAnnotation]; !strings.HasPrefix(got, "driftless/podinfo-prod.yaml → podinfo/templates/deployment.yaml@") {
		t.Errorf("origin of the chart's Deployment = %q, want the HelmChart file and the template", got)
	}
	// Drift on a chart object is put back.
	edit(t, h.ns, "podinfo-prod", "2Gi", nil)
	eventually(t, "the chart's memory limit reverted to 256Mi", func() bool {
		return memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "podinfo-prod")) == "256Mi"
	})

	// Removing the HelmChart prunes the chart's objects, and nothing else.
	removed := h.repo.Commit(t, "remove the HelmChart", map[string]string{"driftless/podinfo-prod.yaml": ""})
	h.requestSync("chart")
	h.waitReady("chart", removed)
	for _, o := range append(chartObjects, [3]string{"apps/v1", "Deployment", "podinfo-prod"}) {
		if get(t, o[0], o[1], h.ns, o[2]) != nil {
			t.Errorf("%s %s of the chart was not pruned when the HelmChart was removed", o[1], o[2])
		}
	}
	if get(t, "apps/v1", "Deployment", h.ns, "podinfo-dev") == nil || get(t, "apps/v1", "Deployment", h.ns, "podinfo") == nil {
		t.Error("removing the HelmChart pruned objects of the other applications")
	}
}
