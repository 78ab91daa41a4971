package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
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
	a := startAgentIn(t, ns)
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

// The agent and driftless build --sync render one Sync — a chart from a
// repository with values from a ConfigMap, a kustomization, variables
// from a ConfigMap — into the same objects: every field build prints is
// the one the agent applied.
func TestTheAgentAndBuildRenderTheSameObjectsOfASync(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	for name, data := range map[string]map[string]string{
		"chart-values": {"values.yaml": "greeting: from-a-configmap\n"},
		"vars":         {"greeting": "bonjour"},
	} {
		if err := cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	charts := testenv.NewChartRepo(t)
	charts.Publish("hello", "1.2.0", testenv.PackageChart(t, "hello", "1.2.0"))
	files := map[string]string{
		"apps/hello.yaml": fmt.Sprintf("apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: hello}\n"+
			"spec:\n  chart: {repository: %q, name: hello, version: 1.2.0}\n  valuesFrom: [{kind: ConfigMap, name: chart-values}]\n", charts.URL),
		"apps/web/kustomization.yaml": "resources: [cm.yaml]\nnamePrefix: prod-\nlabels: [{pairs: {tier: web}}]\n",
		"apps/web/cm.yaml":            diffConfigMap("", "web", "${greeting}"),
	}
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	first := repo.Commit(t, "chart, kustomization, variables", files)
	a := startAgentIn(t, ns)
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.FileURL(), Branch: "main"}},
			Paths:           []string{"apps/hello.yaml", "apps/web"},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: ns,
			SubstituteFrom:  []v1alpha1.SubstituteReference{{Kind: "ConfigMap", Name: "vars"}},
		},
	}
	if err := cl.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(s)
	a.Eventually("the Sync is Ready", syncAppliedAt(key, first))

	b := runBuildCommand(t, "--repo", writeFiles(t, files), "--sync", key.String(),
		"--kubeconfig", env.ControlPlane.KubeconfigPath(), "-o", "json").expect(t, 0)
	var built struct{ Items []map[string]any }
	if err := json.Unmarshal([]byte(b.out), &built); err != nil {
		t.Fatalf("build -o json: %v\n%s", err, b.out)
	}
	var names []string
	for _, obj := range built.Items {
		u := unstructured.Unstructured{Object: obj}
		names = append(names, u.GetKind()+"/"+u.GetName())
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, live); err != nil {
			t.Errorf("build prints %s/%s, which the agent did not apply: %v", u.GetKind(), u.GetName(), err)
			continue
		}
		// The agent renders a commit, build the files: origins differ
		// only by the revision.
		ann := live.GetAnnotations()
		ann["driftless.dev/origin"] = strings.TrimSuffix(ann["driftless.dev/origin"], "@"+first[:7])
		live.SetAnnotations(ann)
		for _, d := range notIn(obj, live.Object, u.GetKind()+"/"+u.GetName()) {
			t.Error(d)
		}
	}
	slices.Sort(names)
	if want := []string{"ConfigMap/hello", "ConfigMap/prod-web"}; !slices.Equal(names, want) {
		t.Errorf("build --sync renders %q, want %q", names, want)
	}
	if got := configValue(t, ns, "hello"); got != "from-a-configmap" {
		t.Errorf("the chart's greeting is %q, want the value of its valuesFrom ConfigMap", got)
	}
}

// notIn lists the fields of want (a rendered object) that got (the
// object in the cluster) does not hold with the same value.
func notIn(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		var out []string
		for k, v := range w {
			out = append(out, notIn(v, g[k], path+"."+k)...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: build renders %v, the agent applied %v", path, want, got)}
		}
	}
	return nil
}

// startAgentIn runs the agent of namespace ns, with no listener and a
// cache of its own, until the test ends.
func startAgentIn(t *testing.T, ns string) *runningAgent {
	t.Helper()
	return startAgent(t,
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", ns,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
		"--cache-dir", t.TempDir(),
	)
}

// A Sync with spec.kustomize.allowRemote whose kustomization names a
// remote base, which the agent syncs, is diffed too: diff --sync fetches
// the base as the agent does, and finds nothing to change.
func TestDiffOfASyncFetchesItsRemoteBasesAsTheAgentDoes(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	git := testenv.NewGitServer(t)
	bases := git.NewRepo(t, "bases")
	bases.Commit(t, "base", map[string]string{
		"base/kustomization.yaml": "resources: [cm.yaml]\n",
		"base/cm.yaml":            diffConfigMap("", "from-a-remote-base", "v1"),
	})
	repo := git.NewRepo(t, "fleet")
	first := repo.Commit(t, "a remote base", map[string]string{
		"workloads/kustomization.yaml": fmt.Sprintf("resources: [%q]\n", bases.FileURL()+"//base?ref=main"),
	})
	a := startAgentIn(t, ns)
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.FileURL(), Branch: "main"}},
			Paths:           []string{"workloads"},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: ns,
			Kustomize:       &v1alpha1.KustomizeSpec{AllowRemote: true},
		},
	}
	if err := cl.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(s)
	a.Eventually("the Sync is Ready at the commit naming the remote base", syncAppliedAt(key, first))

	d := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", env.ControlPlane.KubeconfigPath(), "--output", "json").expect(t, 0).json(t)
	if len(d.Changes) != 0 {
		t.Errorf("diff --sync of the Sync the agent just applied shows changes: %+v", d.Changes)
	}
	bases.Commit(t, "v2", map[string]string{"base/cm.yaml": diffConfigMap("", "from-a-remote-base", "v2")})
	r := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 1)
	for _, want := range []string{"ConfigMap/" + ns + "/from-a-remote-base", "+  key: v2"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("diff --sync after the base changed lacks %q:\n%s", want, r.out)
		}
	}
}
