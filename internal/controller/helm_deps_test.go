package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/charts"
	"github.com/driftless/driftless/internal/testenv"
)

// dependencyChart is a chart whose one template, a ConfigMap named
// <release>-<chart>, holds its version.
func dependencyChart(t *testing.T, name, version, chartType string) []byte {
	t.Helper()
	files := map[string]string{"Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\ntype: %s\n", name, version, chartType)}
	if chartType == "library" {
		files["templates/_names.tpl"] = `{{- define "common.fullname" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}` + "\n"
	} else {
		files["templates/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\ndata:\n  version: {{ .Chart.Version | quote }}\n"
	}
	return testenv.PackageChartFiles(t, files)
}

// A chart from a private HTTP repository depends on a chart in the same
// repository, on one in another repository and on a library chart in an
// OCI registry. Each is fetched from where Chart.yaml says, the
// HelmChart's credentials go to its own repository's host only, and a
// second sync downloads nothing again: the archives are cached by digest.
func TestAChartsDependenciesComeFromTheirRepositories(t *testing.T) {
	h := newHarness(t)
	h.r.RenderOptions.ChartCache = &charts.Fetcher{Dir: t.TempDir()}
	private := testenv.NewChartRepo(t)
	private.Username, private.Password = "deploy", "s3cret-token"
	public := testenv.NewChartRepo(t)
	registry := testenv.NewOCIRegistry(t, "", "")

	private.Publish("redis", "1.2.0", dependencyChart(t, "redis", "1.2.0", "application"))
	private.Publish("redis", "1.3.0", dependencyChart(t, "redis", "1.3.0", "application"))
	public.Publish("metrics", "0.4.0", dependencyChart(t, "metrics", "0.4.0", "application"))
	registry.PushChart(t, "charts/common", "common", "0.1.0", dependencyChart(t, "common", "0.1.0", "library"))
	private.Publish("shop", "1.0.0", testenv.PackageChartFiles(t, map[string]string{
		"Chart.yaml": fmt.Sprintf(`apiVersion: v2
name: shop
version: 1.0.0
dependencies:
- {name: redis, version: "~1.2", repository: %q, alias: cache}
- {name: metrics, version: 0.4.x, repository: %q, condition: metrics.enabled}
- {name: common, version: 0.1.0, repository: %q}
`, private.URL, public.URL, "oci://"+registry.Host+"/charts"),
		"values.yaml":       "metrics: {enabled: true}\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ include \"common.fullname\" . }}\ndata: {from: shop}\n",
	}))

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "charts-auth", Namespace: h.ns},
		StringData: map[string]string{"username": "deploy", "password": "s3cret-token"}}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.repo.Commit(t, "chart", map[string]string{"apps/shop.yaml": fmt.Sprintf(`apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata: {name: shop}
spec:
  chart: {repository: %s, name: shop, version: 1.0.0, secretRef: {name: charts-auth}}
`, private.URL)})
	h.createSync("shop", nil)
	h.expectReady(h.reconcile("shop"))

	for name, want := range map[string]string{"shop-cache": "1.2.0", "shop-metrics": "0.4.0", "shop-shop": ""} {
		if get(t, "v1", "ConfigMap", h.ns, name) == nil {
			t.Errorf("ConfigMap %s was not applied", name)
		} else if got := configMapValue(t, h.ns, name, "version"); got != want {
			t.Errorf("ConfigMap %s has version %q, want %q", name, got, want)
		}
	}
	if n := public.Authorized(); n != 0 {
		t.Errorf("the other repository got %d requests with an Authorization header, want none: credentials go to the HelmChart's own host only", n)
	}

	downloads, blobs := private.Downloads()+public.Downloads(), registry.BlobDownloads()
	h.expectReady(h.reconcile("shop"))
	if got := private.Downloads() + public.Downloads(); got != downloads {
		t.Errorf("the second sync downloaded %d chart archives, want none (cached by digest)", got-downloads)
	}
	if got := registry.BlobDownloads(); got != blobs {
		t.Errorf("the second sync pulled %d blobs from the registry, want none (cached by digest)", got-blobs)
	}
}

// A dependency that cannot be fetched — its repository down, no version
// in its range, an archive that does not match its digest — fails the
// sync with FetchFailed, naming the chart, the dependency and the
// repository; nothing is applied and the last good state stays.
func TestADependencyThatCannotBeFetchedKeepsTheLastState(t *testing.T) {
	h := newHarness(t)
	h.r.RenderOptions.ChartCache = &charts.Fetcher{Dir: t.TempDir()}
	repo := testenv.NewChartRepo(t)
	repo.Publish("metrics", "0.4.0", dependencyChart(t, "metrics", "0.4.0", "application"))
	commitShop := func(version, extra string) {
		t.Helper()
		h.repo.Commit(t, "shop "+version, map[string]string{
			"apps/shop.yaml": "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: shop}\nspec:\n  chart: {path: charts/shop}\n",
			"charts/shop/Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n- {name: metrics, version: %q, repository: %q}\n",
				version, repo.URL),
			"charts/shop/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\ndata: {extra: " + extra + "}\n",
		})
	}
	commitShop("0.4.x", "one")
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })
	h.expectReady(h.reconcile("shop"))
	kept := func(step string) {
		t.Helper()
		if got := configMapValue(t, h.ns, "shop-metrics", "version"); got != "0.4.0" {
			t.Errorf("%s: the dependency's ConfigMap has version %q, want 0.4.0 kept", step, got)
		}
		if got := configMapValue(t, h.ns, "shop", "extra"); got != "one" {
			t.Errorf("%s: the chart's ConfigMap has %q, want the last good state (one) kept", step, got)
		}
	}

	commitShop(">=9", "two")
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonFetchFailed,
		"apps/shop.yaml", "chart shop: dependency metrics >=9 from "+repo.URL, "no version of chart metrics", "matches \">=9\"; available: 0.4.0")
	kept("no version in the range")

	commitShop("0.4.x", "two")
	repo.Replace("metrics", "0.4.0", dependencyChart(t, "metrics", "0.4.1", "application"))
	h.r.RenderOptions.ChartCache = &charts.Fetcher{Dir: t.TempDir()} // a new agent: an empty cache
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonFetchFailed,
		"chart shop: dependency metrics 0.4.x from "+repo.URL, "does not match its digest")
	kept("an archive that does not match its digest")

	repo.Close()
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonFetchFailed, "chart shop: dependency metrics 0.4.x from "+repo.URL, "is unreachable")
	kept("the repository down")
}

// A chart's lookup answers from the cluster only with spec.lookup, and
// then as the Sync's ServiceAccount: a ConfigMap it may read renders its
// value; one in a namespace it may not read fails the sync, naming the
// lookup, and the last good state stays.
func TestAChartsLookupReadsAsTheSyncsServiceAccount(t *testing.T) {
	h := newHarness(t)
	other := env.Namespace(t) // the tenant has no rights there
	for _, ns := range []string{h.ns, other} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"color": "teal-" + ns}}
		if err := c.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(lookup bool, namespace string) {
		t.Helper()
		h.repo.Commit(t, "lookup", map[string]string{
			"apps/shop.yaml":         fmt.Sprintf("apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: shop}\nspec:\n  chart: {path: charts/shop}\n  lookup: %t\n  values: {from: %s}\n", lookup, namespace),
			"charts/shop/Chart.yaml": "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
			"charts/shop/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: shop
data:
  color: {{ dig "data" "color" "none" (lookup "v1" "ConfigMap" .Values.from "settings") | quote }}
`,
		})
	}
	commit(false, h.ns)
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })
	h.expectReady(h.reconcile("shop"))
	if got := configMapValue(t, h.ns, "shop", "color"); got != "none" {
		t.Errorf("without spec.lookup the chart rendered %q, want none (lookup answers nothing, as helm template)", got)
	}

	commit(true, h.ns)
	h.expectReady(h.reconcile("shop"))
	if got, want := configMapValue(t, h.ns, "shop", "color"), "teal-"+h.ns; got != want {
		t.Errorf("with spec.lookup the chart rendered %q, want %q from the cluster", got, want)
	}

	commit(true, other)
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonBuildFailed,
		"apps/shop.yaml", "lookup v1 ConfigMap "+other+"/settings was denied to the identity the Sync reads with", "turn spec.lookup off")
	if got, want := configMapValue(t, h.ns, "shop", "color"), "teal-"+h.ns; got != want {
		t.Errorf("after a denied lookup the ConfigMap holds %q, want %q kept", got, want)
	}
}
