package controller

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/charts"
	"github.com/driftless/driftless/internal/testenv"
)

// A HelmChart may take its chart from an HTTP Helm repository with a
// version range: a new version published within the range is applied at
// the next sync, with no commit; one outside it is not; an unreachable
// repository is FetchFailed and the cluster keeps what it has.
func TestAChartFromARepositoryFollowsItsVersionRange(t *testing.T) {
	h := newHarness(t)
	h.r.RenderOptions.ChartCache = &charts.Fetcher{Dir: t.TempDir()}
	repo := testenv.NewChartRepo(t)
	repo.Publish("hello", "1.2.0", testenv.PackageChart(t, "hello", "1.2.0"))
	h.repo.Commit(t, "chart", map[string]string{"apps/hello.yaml": fmt.Sprintf(`apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata:
  name: hello
spec:
  chart:
    repository: %s
    name: hello
    version: ">=1.2 <2"
`, repo.URL)})
	h.createSync("charts", nil)
	chartVersion := func() string {
		t.Helper()
		cm := get(t, "v1", "ConfigMap", h.ns, "hello")
		if cm == nil {
			t.Fatal("the chart's ConfigMap was not created")
		}
		v, _, _ := unstructured.NestedString(cm.Object, "data", "chartVersion")
		return v
	}
	h.expectReady(h.reconcile("charts"))
	if got := chartVersion(); got != "1.2.0" {
		t.Fatalf("chart version %s applied, want 1.2.0", got)
	}

	repo.Publish("hello", "1.3.0", testenv.PackageChart(t, "hello", "1.3.0"))
	repo.Publish("hello", "2.0.0", testenv.PackageChart(t, "hello", "2.0.0"))
	h.expectReady(h.reconcile("charts"))
	if got := chartVersion(); got != "1.3.0" {
		t.Errorf("after 1.3.0 and 2.0.0 were published, version %s is applied, want 1.3.0 (the highest within >=1.2 <2)", got)
	}

	repo.Close()
	h.expectFailed(h.reconcile("charts"), v1alpha1.ReasonFetchFailed, "apps/hello.yaml")
	if got := chartVersion(); got != "1.3.0" {
		t.Errorf("with the repository down, version %s is applied, want 1.3.0 kept", got)
	}
}
