package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// A Sync whose HelmChart takes its chart from an HTTP Helm repository,
// which the agent syncs, is built and diffed by the CLI too: both show
// the chart's objects, rendered as the agent rendered them.
func TestBuildAndDiffOfASyncShowTheObjectsOfAChartFromARepository(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the CLI's chart cache
	charts := testenv.NewChartRepo(t)
	charts.Publish("hello", "1.2.0", testenv.PackageChart(t, "hello", "1.2.0"))
	files := map[string]string{"workloads/hello.yaml": fmt.Sprintf(`apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata:
  name: hello
spec:
  chart:
    repository: %s
    name: hello
    version: ">=1.2 <2"
`, charts.URL)}
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	first := repo.Commit(t, "a chart from a repository", files)
	a := startAgent(t,
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", ns,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
		"--cache-dir", t.TempDir(),
	)
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	a.Eventually("the Sync is Ready at the chart's commit", syncAppliedAt(key, first))
	if got := configValue(t, ns, "hello"); got != "hello" {
		t.Fatalf("the agent applied the chart's ConfigMap with greeting %q, want hello", got)
	}
	kubeconfig := env.ControlPlane.KubeconfigPath()

	b := runBuildCommand(t, "--repo", writeFiles(t, files), "--sync", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
	for _, want := range []string{"# Source: workloads/hello.yaml", "kind: ConfigMap", "name: hello", `chartVersion: 1.2.0`} {
		if !strings.Contains(b.out, want) {
			t.Errorf("build --sync output lacks %q:\n%s", want, b.out)
		}
	}

	// What the agent applied is what git holds: no change, and the
	// chart's ConfigMap is among the objects compared.
	d := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig, "--output", "json").expect(t, 0).json(t)
	if len(d.Changes) != 0 {
		t.Errorf("diff --sync of the Sync the agent just applied shows changes: %+v", d.Changes)
	}
	charts.Publish("hello", "1.3.0", testenv.PackageChart(t, "hello", "1.3.0"))
	r := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig).expect(t, 1)
	for _, want := range []string{"ConfigMap/" + ns + "/hello", `+  chartVersion: 1.3.0`} {
		if !strings.Contains(r.out, want) {
			t.Errorf("diff --sync after 1.3.0 was published lacks %q:\n%s", want, r.out)
		}
	}
}
