package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/driftless/driftless/api/v1alpha1"
)

// shopChart is a repository with an application chart that depends, by
// file://, on a library chart and twice (two aliases) on a worker chart.
func shopChart() map[string]string {
	return map[string]string{
		"apps/shop/helmchart.yaml": `apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata: {name: shop, namespace: shop}
spec:
  chart: {path: charts/shop}
  values:
    cron: {enabled: false}
`,
		"charts/shop/Chart.yaml": `apiVersion: v2
name: shop
version: 1.0.0
dependencies:
- name: common
  version: 0.1.x
  repository: file://../common
- name: worker
  version: ^2.0.0
  repository: file://../worker
  alias: jobs
  condition: jobs.enabled
  import-values: [data]
- name: worker
  version: ^2.0.0
  repository: file://../worker
  alias: cron
  condition: cron.enabled
`,
		"charts/shop/values.yaml": "jobs: {enabled: true}\ncron: {enabled: true}\n",
		"charts/shop/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "common.fullname" . }}
data:
  workerPort: {{ .Values.workerPort | quote }}
`,
		"charts/common/Chart.yaml":            "apiVersion: v2\nname: common\nversion: 0.1.3\ntype: library\n",
		"charts/common/templates/_names.tpl":  `{{- define "common.fullname" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}` + "\n",
		"charts/worker/Chart.yaml":            "apiVersion: v2\nname: worker\nversion: 2.1.0\n",
		"charts/worker/values.yaml":           "exports:\n  data:\n    workerPort: 8080\n",
		"charts/worker/templates/deploy.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\n",
	}
}

// A chart's dependencies that charts/ does not hold are read from their
// repository, here file:// chart directories of the same git repository,
// with condition, alias, import-values and a library chart working as
// helm dependency build followed by helm template makes them work.
func TestRenderHelmChartDependenciesAsHelmDoes(t *testing.T) {
	objs, err := render(t, shopChart(), Options{Paths: []string{"apps/shop"}, Scope: helmCluster})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range objs {
		port, _, _ := unstructuredString(o, "data", "workerPort")
		got[o.decoded().GetName()] = port
	}
	want := map[string]string{
		"shop-shop": "8080", // the library's helper; the worker's exported value
		"shop-jobs": "",     // the enabled alias; cron is disabled by the HelmChart's values
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestRenderHelmChartDependencyErrors(t *testing.T) {
	with := func(edit func(files map[string]string)) map[string]string {
		files := shopChart()
		edit(files)
		return files
	}
	dependsOn := func(repository string) map[string]string {
		return with(func(f map[string]string) {
			f["charts/shop/Chart.yaml"] = "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n- name: common\n  version: 0.1.x\n  repository: " + repository + "\n"
		})
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{{
		name:  "a file:// dependency that leaves the repository",
		files: dependsOn("file://../../../etc"),
		want:  []string{"apps/shop/helmchart.yaml", "chart shop: dependency common: file://../../../etc leads outside the repository"},
	}, {
		name:  "a file:// dependency that is not a chart",
		files: dependsOn("file://../nope"),
		want:  []string{`chart shop: dependency common (file://../nope) "charts/nope" not found in the repository`},
	}, {
		name: "a file:// dependency whose version is outside the range",
		files: with(func(f map[string]string) {
			f["charts/common/Chart.yaml"] = "apiVersion: v2\nname: common\nversion: 0.2.0\ntype: library\n"
		}),
		want: []string{`chart shop: dependency common: the chart at charts/common is version 0.2.0, which "0.1.x" in Chart.yaml does not allow`},
	}, {
		name:  "a dependency with no repository that charts/ does not hold",
		files: dependsOn(`""`),
		want:  []string{"chart shop: dependency common is in Chart.yaml but not in charts/, and names no repository"},
	}, {
		name:  "a repository named as helm repo add names it",
		files: dependsOn("\"@bitnami\""),
		want:  []string{"chart shop: dependency common names repository @bitnami, a name of helm repo add", "write the repository's URL"},
	}, {
		name:  "a dependency from a repository without the agent's fetcher",
		files: dependsOn("https://charts.example.com"),
		want:  []string{"chart shop: dependency common from https://charts.example.com: dependencies from repositories need the agent's chart fetcher"},
	}, {
		name: "a Chart.lock that no longer matches Chart.yaml",
		files: with(func(f map[string]string) {
			f["charts/shop/Chart.lock"] = "dependencies:\n- name: common\n  repository: file://../common\n  version: 0.1.3\ndigest: sha256:0000000000000000000000000000000000000000000000000000000000000000\ngenerated: \"2024-01-01T00:00:00Z\"\n"
		}),
		want: []string{"chart shop: Chart.lock is out of sync with the dependencies in Chart.yaml", "helm dependency update"},
	}, {
		name: "a library chart as the HelmChart's chart",
		files: with(func(f map[string]string) {
			f["apps/shop/helmchart.yaml"] = "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: shop}\nspec:\n  chart: {path: charts/common}\n"
		}),
		want: []string{"chart common is a library chart, which renders nothing on its own; name an application chart that depends on it"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := render(t, tc.files, Options{Paths: []string{"apps/shop"}, Scope: helmCluster})
			if objs != nil {
				t.Errorf("Render returned %d objects with its error, want none", len(objs))
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

// A Chart.lock that matches Chart.yaml (its digest as helm dependency
// update writes it) pins the versions: the fetcher is asked for the
// locked version, not the range.
func TestRenderHelmChartDependencyLockedVersion(t *testing.T) {
	files := map[string]string{
		"apps/shop/helmchart.yaml": "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: shop}\nspec:\n  chart: {path: charts/shop}\n",
		"charts/shop/Chart.yaml":   "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n- name: redis\n  version: ^1.0.0\n  repository: https://charts.example.com/stable\n",
		// The digest helm dependency update v4.3.1 wrote for this Chart.yaml and lock.
		"charts/shop/Chart.lock": "dependencies:\n- name: redis\n  repository: https://charts.example.com/stable\n  version: 1.2.0\ndigest: " + lockDigestOf(t) + "\ngenerated: \"2024-01-01T00:00:00Z\"\n",
	}
	f := &fetcher{err: errFetchTest}
	_, err := render(t, files, Options{Paths: []string{"apps/shop"}, Scope: helmCluster, Charts: f})
	if err == nil || !strings.Contains(err.Error(), "chart shop: dependency redis 1.2.0 from https://charts.example.com/stable: fetch failed: repository down") {
		t.Errorf("error %v, want the fetch failure of redis 1.2.0 naming the repository", err)
	}
	want := v1alpha1.ChartReference{Repository: "https://charts.example.com/stable", Name: "redis", Version: "1.2.0"}
	if diff := cmp.Diff(want, f.got.Chart); diff != "" {
		t.Errorf("fetcher asked for (-want +got):\n%s", diff)
	}
}

var errFetchTest = errors.New("repository down")

// lockDigestOf is the digest of Chart.lock for the Chart.yaml of
// TestRenderHelmChartDependencyLockedVersion, computed as Helm does.
func lockDigestOf(t *testing.T) string {
	t.Helper()
	dep := func(version string) []*chart.Dependency {
		return []*chart.Dependency{{Name: "redis", Version: version, Repository: "https://charts.example.com/stable"}}
	}
	sum, err := lockDigest(dep("^1.0.0"), dep("1.2.0"))
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestDependencyCredentialsOnlyForTheSameHost(t *testing.T) {
	secret := &v1alpha1.LocalObjectReference{Name: "charts-auth"}
	for _, tc := range []struct {
		name       string
		chart      v1alpha1.ChartReference
		repository string
		want       *v1alpha1.LocalObjectReference
	}{
		{"a dependency in the chart's own repository", v1alpha1.ChartReference{Repository: "https://charts.example.com/a", SecretRef: secret}, "https://charts.example.com/b", secret},
		{"a dependency in a registry on the same host", v1alpha1.ChartReference{OCI: "oci://Registry.example.com:5000/charts/web", SecretRef: secret}, "oci://registry.example.com:5000/charts", secret},
		{"a dependency on another host", v1alpha1.ChartReference{Repository: "https://charts.example.com", SecretRef: secret}, "https://charts.other.com", nil},
		{"a dependency on another port", v1alpha1.ChartReference{OCI: "oci://registry.example.com:5000/web", SecretRef: secret}, "oci://registry.example.com:5001/lib", nil},
		{"a chart without a secretRef", v1alpha1.ChartReference{Repository: "https://charts.example.com"}, "https://charts.example.com", nil},
		{"a chart of the repository", v1alpha1.ChartReference{Path: "charts/web"}, "https://charts.example.com", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, dependencyCredentials(tc.chart, tc.repository)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
