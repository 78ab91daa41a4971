package render

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/origin"
)

// webChart is a repository with a chart, its subchart, a values file and a
// HelmChart that renders it.
func webChart() map[string]string {
	return map[string]string{
		"charts/web/Chart.yaml": `apiVersion: v2
name: web
version: 0.1.0
dependencies:
- name: cache
  version: 0.1.0
`,
		"charts/web/values.yaml":            "replicaCount: 1\ncolor: red\ngreeting: hello\nmode: chart\n",
		"charts/web/values-production.yaml": "replicaCount: 3\ncolor: blue\n",
		"charts/web/templates/_helpers.tpl": `{{- define "web.labels" -}}
app: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
`,
		"charts/web/templates/NOTES.txt": "Thank you for installing {{ .Chart.Name }}.\n",
		"charts/web/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels:
    {{- include "web.labels" . | nindent 4 }}
  annotations:
    kube: {{ .Capabilities.KubeVersion.Version | quote }}
    widgets: {{ .Capabilities.APIVersions.Has "example.com/v1/Widget" | quote }}
    install: {{ .Release.IsInstall | quote }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`,
		"charts/web/templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {app: {{ .Release.Name }}}
  ports:
  - port: 80
`,
		"charts/web/templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  color: {{ .Values.color }}
  greeting: {{ .Values.greeting }}
  mode: {{ .Values.mode }}
  namespace: {{ .Release.Namespace }}
`,
		"charts/web/templates/migrate.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "-5"
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: busybox:1.36
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-migrate-config
  annotations:
    helm.sh/hook: pre-install
    helm.sh/hook-delete-policy: hook-succeeded
`,
		"charts/web/templates/notify.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-notify
  annotations:
    helm.sh/hook: post-install
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: notify
        image: busybox:1.36
`,
		"charts/web/templates/tests/test-connection.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
spec:
  containers:
  - name: wget
    image: busybox:1.36
`,
		"charts/web/crds/widgets.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
`,
		"charts/web/charts/cache/Chart.yaml":               "apiVersion: v2\nname: cache\nversion: 0.1.0\n",
		"charts/web/charts/cache/values.yaml":              "size: small\n",
		"charts/web/charts/cache/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cache\ndata:\n  size: {{ .Values.size }}\n",
		"apps/web/helmchart.yaml": `apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata:
  name: web
  namespace: shop
spec:
  chart:
    path: charts/web
  valuesFiles: [charts/web/values-production.yaml]
  valuesFrom:
  - kind: ConfigMap
    name: web-values
  values:
    greeting: hi
  includeCRDs: true
`,
	}
}

// helmCluster is cluster with the kinds of the chart.
var helmCluster = func() fakeScope {
	s := maps.Clone(cluster)
	s[schema.GroupKind{Group: "batch", Kind: "Job"}] = true
	s[schema.GroupKind{Kind: "Pod"}] = true
	return s
}()

// configMaps serves valuesFrom from a map of "Kind/name/key" to data.
func configMaps(data map[string]string) ValuesReader {
	return func(kind, name, key string) ([]byte, error) {
		v, ok := data[kind+"/"+name+"/"+key]
		if !ok {
			return nil, fmt.Errorf("%s %s: %w", kind, name, ErrValuesNotFound)
		}
		return []byte(v), nil
	}
}

func renderWeb(t *testing.T, files map[string]string, opts Options) ([]Object, error) {
	t.Helper()
	opts.Paths = []string{"apps/web"}
	opts.Scope = helmCluster
	if opts.ValuesFrom == nil {
		opts.ValuesFrom = configMaps(map[string]string{"ConfigMap/web-values/values.yaml": "color: green\nmode: cluster\n"})
	}
	return render(t, files, opts)
}

func TestRenderHelmChartAsHelmTemplateDoes(t *testing.T) {
	objs, err := renderWeb(t, webChart(), Options{SyncLabel: "driftless-system.shop", Revision: "0123456789abcdef",
		KubeVersion: "v1.37.2", APIVersions: []string{"v1", "apps/v1", "example.com/v1", "example.com/v1/Widget"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Origin{}
	for _, o := range objs {
		got[ref(o.decoded())] = o.Origin
	}
	const file = "apps/web/helmchart.yaml"
	want := map[string]Origin{
		"CustomResourceDefinition/widgets.example.com": {Path: file, From: "web/crds/widgets.yaml"},
		"Deployment/shop/web":                          {Path: file, From: "web/templates/deployment.yaml"},
		"Service/shop/web":                             {Path: file, From: "web/templates/service.yaml"},
		"ConfigMap/shop/web-config":                    {Path: file, From: "web/templates/configmap.yaml"},
		"Job/shop/web-migrate":                         {Path: file, From: "web/templates/migrate.yaml"},
		"ConfigMap/shop/web-migrate-config":            {Path: file, From: "web/templates/migrate.yaml"},
		"Job/shop/web-notify":                          {Path: file, From: "web/templates/notify.yaml"},
		"ConfigMap/shop/web-cache":                     {Path: file, From: "web/charts/cache/templates/configmap.yaml"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects and origins (-want +got); the test hook, NOTES.txt and no release Secret:\n%s", diff)
	}

	byRef := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byRef[ref(o.decoded())] = o.decoded()
	}
	cm := byRef["ConfigMap/shop/web-config"]
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	// chart values < values files < valuesFrom < inline values
	if diff := cmp.Diff(map[string]string{"color": "green", "greeting": "hi", "mode": "cluster", "namespace": "shop"}, data); diff != "" {
		t.Errorf("values of the ConfigMap (-want +got):\n%s", diff)
	}
	deploy := byRef["Deployment/shop/web"]
	if replicas, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas"); replicas != 3 {
		t.Errorf("replicas = %d, want 3 from the values file", replicas)
	}
	annotations := deploy.GetAnnotations()
	for k, v := range map[string]string{"kube": "v1.37.2", "widgets": "true", "install": "true",
		v1alpha1.OriginAnnotation: "apps/web/helmchart.yaml → web/templates/deployment.yaml@0123456"} {
		if annotations[k] != v {
			t.Errorf("Deployment annotation %s = %q, want %q", k, annotations[k], v)
		}
	}
	if _, ok := annotations[v1alpha1.WaveAnnotation]; ok {
		t.Errorf("the chart's Deployment has a wave annotation %q, want none (wave 0)", annotations[v1alpha1.WaveAnnotation])
	}
	labels := deploy.GetLabels()
	if labels["app.kubernetes.io/managed-by"] != "driftless" || labels[v1alpha1.SyncLabel] != "driftless-system.shop" {
		t.Errorf("Deployment labels = %v, want managed-by driftless (.Release.Service) and the sync label", labels)
	}

	// Hooks and CRDs become waves: CRDs, then pre-install hooks by weight,
	// the chart, then post-install hooks.
	for name, wantWave := range map[string]string{
		"CustomResourceDefinition/widgets.example.com": "-3",
		"Job/shop/web-migrate":                         "-2",
		"ConfigMap/shop/web-migrate-config":            "-1",
		"Job/shop/web-notify":                          "1",
	} {
		if got := byRef[name].GetAnnotations()[v1alpha1.WaveAnnotation]; got != wantWave {
			t.Errorf("%s: wave %q, want %q", name, got, wantWave)
		}
	}
	// before-hook-creation (the default) lets a changed Job be re-created;
	// hook-succeeded does not.
	for name, wantForce := range map[string]string{"Job/shop/web-migrate": "enabled", "Job/shop/web-notify": "enabled", "ConfigMap/shop/web-migrate-config": ""} {
		if got := byRef[name].GetAnnotations()[v1alpha1.ForceAnnotation]; got != wantForce {
			t.Errorf("%s: %s = %q, want %q", name, v1alpha1.ForceAnnotation, got, wantForce)
		}
	}

	o, _, err := origin.Parse(annotations[v1alpha1.OriginAnnotation])
	if err != nil || o != (Origin{Path: file, From: "web/templates/deployment.yaml"}) {
		t.Errorf("origin.Parse = %+v, %v; want the HelmChart file and the template", o, err)
	}
}

func TestRenderHelmChartCapabilitiesWithoutACluster(t *testing.T) {
	objs, err := renderWeb(t, webChart(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.decoded().GetKind() == "Deployment" {
			a := o.decoded().GetAnnotations()
			if a["kube"] != DefaultKubeVersion() || a["widgets"] != "false" {
				t.Errorf("kube = %q, widgets = %q; want %q (client-go's) and false", a["kube"], a["widgets"], DefaultKubeVersion())
			}
		}
	}
	if DefaultKubeVersion() != "v1.37.0" {
		t.Errorf("DefaultKubeVersion() = %q, want v1.37.0 from client-go v0.37", DefaultKubeVersion())
	}
}

func TestRenderHelmChartNamespaceDefaults(t *testing.T) {
	files := webChart()
	files["apps/web/helmchart.yaml"] = strings.Replace(files["apps/web/helmchart.yaml"], "  namespace: shop\n", "", 1)
	for _, tc := range []struct {
		name, target, want string
	}{
		{"the Sync's target namespace when the HelmChart names none", "store", "store"},
		{"default when neither names one", "", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderWeb(t, files, Options{TargetNamespace: tc.target})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if o.decoded().GetName() == "web-config" {
					ns, _, _ := unstructured.NestedString(o.decoded().Object, "data", "namespace")
					if ns != tc.want || o.decoded().GetNamespace() != tc.want {
						t.Errorf(".Release.Namespace = %q, namespace %q; want %q", ns, o.decoded().GetNamespace(), tc.want)
					}
				}
			}
		})
	}
}

func TestRenderHelmChartErrors(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "Chart.yaml"), []byte("apiVersion: v2\nname: evil\nversion: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chartFile := func(spec string) map[string]string {
		files := webChart()
		files["apps/web/helmchart.yaml"] = "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata:\n  name: web\nspec:\n" + spec
		return files
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		link  string // a symbolic link charts/evil → outside
		opts  Options
		want  []string
	}{{
		name: "a template error names the HelmChart, the template and its line",
		files: func() map[string]string {
			f := webChart()
			f["charts/web/templates/broken.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ required \"set imageTag\" .Values.imageTag }}\n"
			return f
		}(),
		want: []string{"apps/web/helmchart.yaml", "HelmChart/web", "web/templates/broken.yaml:4", "set imageTag"},
	}, {
		name:  "a missing values file names the HelmChart and the file",
		files: chartFile("  chart: {path: charts/web}\n  valuesFiles: [charts/web/values-nope.yaml]\n"),
		want:  []string{"apps/web/helmchart.yaml:1 (document 0): HelmChart/web: spec.valuesFiles[0]: charts/web/values-nope.yaml not found in the repository"},
	}, {
		name:  "a chart path that leaves the repository",
		files: chartFile("  chart: {path: ../outside}\n"),
		want:  []string{`spec.chart.path "../outside" is outside the repository`},
	}, {
		name:  "an absolute chart path",
		files: chartFile("  chart: {path: " + outside + "}\n"),
		want:  []string{"is outside the repository"},
	}, {
		name:  "a chart path through a symbolic link out of the repository",
		files: chartFile("  chart: {path: charts/evil}\n"),
		link:  "charts/evil",
		want:  []string{`spec.chart.path "charts/evil" cannot be read`},
	}, {
		name:  "a chart path without Chart.yaml",
		files: chartFile("  chart: {path: apps}\n"),
		want:  []string{`spec.chart.path "apps" holds no Chart.yaml`},
	}, {
		name:  "an unknown field names the file and its line",
		files: chartFile("  chart:\n    path: charts/web\n  valueFiles: [a.yaml]\n"),
		want:  []string{"apps/web/helmchart.yaml:1 (document 0): HelmChart: line 8: unknown field \"spec.valueFiles\""},
	}, {
		name:  "a chart from a repository without the agent's fetcher",
		files: chartFile("  chart: {repository: https://charts.example.com, name: web, version: 1.x}\n"),
		want:  []string{"charts from repositories need the agent's chart fetcher"},
	}, {
		name:  "valuesFrom without a cluster",
		files: chartFile("  chart: {path: charts/web}\n  valuesFrom: [{kind: Secret, name: web}]\n"),
		opts:  Options{ValuesFrom: nil},
		want:  []string{"spec.valuesFrom[0]: Secret web key values.yaml is read from the cluster", "driftless build --sync"},
	}, {
		name:  "a missing ConfigMap of valuesFrom that is not optional",
		files: chartFile("  chart: {path: charts/web}\n  valuesFrom: [{kind: ConfigMap, name: nope}]\n"),
		opts:  Options{ValuesFrom: configMaps(nil)},
		want:  []string{"spec.valuesFrom[0]: ConfigMap nope key values.yaml", "mark the entry optional: true"},
	}, {
		name: "a schema that refers to a document on the network",
		files: func() map[string]string {
			f := webChart()
			f["charts/web/values.schema.json"] = `{"$ref": "https://example.com/s.json"}`
			return f
		}(),
		want: []string{`values.schema.json refers to "https://example.com/s.json"`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Root = checkout(t, tc.files)
			if tc.link != "" {
				if err := os.Symlink(outside, filepath.Join(opts.Root, tc.link)); err != nil {
					t.Fatal(err)
				}
			}
			opts.Paths, opts.Scope = []string{"apps/web"}, helmCluster
			if opts.ValuesFrom == nil && tc.name != "valuesFrom without a cluster" {
				opts.ValuesFrom = configMaps(map[string]string{"ConfigMap/web-values/values.yaml": "{}"})
			}
			objs, err := Render(opts)
			if objs != nil {
				t.Errorf("Render returned %d objects with its errors, want none", len(objs))
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestRenderHelmChartOptionalValuesFromAndFetchFailures(t *testing.T) {
	files := webChart()
	files["apps/web/helmchart.yaml"] = strings.Replace(files["apps/web/helmchart.yaml"], "    name: web-values\n", "    name: web-values\n    optional: true\n", 1)
	if _, err := renderWeb(t, files, Options{ValuesFrom: configMaps(nil)}); err != nil {
		t.Errorf("a missing optional valuesFrom: %v, want it skipped", err)
	}
	unreachable := func(kind, name, key string) ([]byte, error) { return nil, errors.New("connection refused") }
	_, err := renderWeb(t, webChart(), Options{ValuesFrom: unreachable})
	if !errors.Is(err, ErrFetchFailed) {
		t.Errorf("an unreadable valuesFrom: %v, want an error wrapping ErrFetchFailed", err)
	}
}

// fetcher serves one chart archive, or an error.
type fetcher struct {
	chart FetchedChart
	err   error
	got   ChartRequest
}

func (f *fetcher) FetchChart(req ChartRequest) (FetchedChart, error) {
	f.got = req
	return f.chart, f.err
}

func TestRenderHelmChartFromTheChartFetcher(t *testing.T) {
	files := map[string]string{"apps/web/helmchart.yaml": `apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata: {name: web}
spec:
  chart: {oci: "oci://registry.example.com/charts/web", version: 1.x}
`}
	f := &fetcher{err: errors.New("registry.example.com: connection refused")}
	_, err := render(t, files, Options{Paths: []string{"apps/web"}, Scope: helmCluster, Charts: f})
	if !errors.Is(err, ErrFetchFailed) || !strings.Contains(err.Error(), "oci://registry.example.com/charts/web") {
		t.Errorf("error %v: want a fetch failure naming the chart", err)
	}
	if f.got.HelmChart != "apps/web/helmchart.yaml" || f.got.Chart.Version != "1.x" {
		t.Errorf("fetcher asked for %+v, want the HelmChart's file and chart reference", f.got)
	}
}

func TestRenderHelmChartCountsAgainstTheBudgets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budgets Budgets
		want    string
	}{
		{"the chart's files count as files", Budgets{MaxFiles: 5}, "--render-max-files"},
		{"the rendered objects count as objects", Budgets{MaxObjects: 3}, "--render-max-objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderWeb(t, webChart(), Options{Budgets: tc.budgets})
			if !errors.Is(err, ErrOverBudget) || !strings.Contains(err.Error(), tc.want) || objs != nil {
				t.Errorf("%d objects, error %v; want none and one naming %s", len(objs), err, tc.want)
			}
		})
	}
}
