package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func runBuildCommand(t *testing.T, args ...string) diffResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(append([]string{"build"}, args...), &out, &errOut)
	return diffResult{code: code, out: out.String(), errOut: errOut.String()}
}

// writeFiles writes files into a new directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var buildFiles = map[string]string{
	"apps/plain/config.yaml":                 diffConfigMap("", "plain", "${greeting:=hi}") + "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
	"apps/overlay/kustomization.yaml":        "resources: [cm.yaml]\nnamePrefix: prod-\n",
	"apps/overlay/cm.yaml":                   diffConfigMap("", "web", "v1"),
	"elsewhere/not-rendered.yaml":            diffConfigMap("", "elsewhere", "v1"),
	"apps/overlay/ignored-by-kustomize.yaml": "not: an object\n",
}

func TestBuildPrintsTheRenderWithTheOriginOfEachObject(t *testing.T) {
	dir := writeFiles(t, buildFiles)
	r := runBuildCommand(t, "--repo", dir, "--path", "apps/plain", "--path", "apps/overlay", "--target-namespace", "shop").expect(t, 0)
	want := `# Source: apps/plain/config.yaml#0
apiVersion: v1
data:
  key: ${greeting:=hi}
kind: ConfigMap
metadata:
  annotations:
    driftless.dev/origin: apps/plain/config.yaml#0
  name: plain
  namespace: shop
---
# Source: apps/plain/config.yaml#1
apiVersion: v1
kind: Namespace
metadata:
  annotations:
    driftless.dev/origin: apps/plain/config.yaml#1
  name: shop
---
# Source: apps/overlay/kustomization.yaml → apps/overlay/cm.yaml
apiVersion: v1
data:
  key: v1
kind: ConfigMap
metadata:
  annotations:
    driftless.dev/origin: apps/overlay/kustomization.yaml → apps/overlay/cm.yaml
  name: prod-web
  namespace: shop
`
	if r.out != want {
		t.Errorf("output:\n%s\nwant:\n%s", r.out, want)
	}

	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	r = runBuildCommand(t, "--repo", dir, "--path", "apps/overlay", "-o", "json").expect(t, 0)
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || list.Kind != "List" || len(list.Items) != 1 {
		t.Errorf("-o json: want a List of one object, got %v:\n%s", err, r.out)
	}
}

func TestBuildOfFilesThatDoNotRenderExitsTwoNamingTheFileAndLine(t *testing.T) {
	dir := writeFiles(t, map[string]string{"apps/a.yaml": diffConfigMap("", "a", "v1") + "---\nkind: [\n"})
	r := runBuildCommand(t, "--repo", dir).expect(t, 2)
	if !strings.Contains(r.errOut, "apps/a.yaml:8 (document 1): invalid YAML: line 8") || r.out != "" {
		t.Errorf("want the file and line of the error and no output; stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
	}
}

func TestBuildRefusesWrongFlags(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no repository", nil, "--repo is required"},
		{"a repository that is not a directory", []string{"--repo", filepath.Join(dir, "gone")}, "is not a directory"},
		{"paths with a Sync", []string{"--repo", dir, "--sync", "a/b", "--path", "x"}, "the Sync's spec.paths and spec.targetNamespace are rendered"},
		{"a kubeconfig without a Sync", []string{"--repo", dir, "--kubeconfig", "k"}, "--kubeconfig is for --sync"},
		{"an unknown output", []string{"--repo", dir, "-o", "table"}, `--output "table": use yaml or json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBuildCommand(t, tt.args...).expect(t, 2)
			if !strings.Contains(r.errOut, tt.want) {
				t.Errorf("error lacks %q:\n%s", tt.want, r.errOut)
			}
		})
	}
}

func TestBuildOfASyncRendersItsPathsNamespaceAndVariables(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vars", Namespace: ns},
		Data:       map[string]string{"greeting": "bonjour"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-vars", Namespace: ns},
		Data:       map[string][]byte{"token": []byte("t0ken-Value")},
	}); err != nil {
		t.Fatal(err)
	}
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: "file:///nowhere", Branch: "main"}},
			Paths:           []string{"apps/plain"},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: ns,
			Substitute:      map[string]string{"team": "shop"},
			SubstituteFrom: []v1alpha1.SubstituteReference{
				{Kind: "ConfigMap", Name: "vars"},
				{Kind: "Secret", Name: "secret-vars"},
			},
		},
	}
	if err := cl.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"apps/plain/config.yaml": diffConfigMap("", "plain", "${greeting:=hi}") + "  team: ${team}\n  auth: Bearer ${token}\n",
	}
	kubeconfig := env.ControlPlane.KubeconfigPath()
	r := runBuildCommand(t, "--repo", writeFiles(t, files), "--sync", ns+"/fleet", "--kubeconfig", kubeconfig).expect(t, 0)
	for _, want := range []string{"# Source: apps/plain/config.yaml#0\n", "key: bonjour\n", "team: shop\n", "auth: Bearer ***\n", "namespace: " + ns + "\n", "driftless.dev/sync: " + ns + ".fleet\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "t0ken-Value") {
		t.Errorf("output shows the Secret's value:\n%s", r.out)
	}

	files["apps/plain/config.yaml"] += "  region: ${region}\n"
	r = runBuildCommand(t, "--repo", writeFiles(t, files), "--sync", ns+"/fleet", "--kubeconfig", kubeconfig).expect(t, 2)
	if want := "apps/plain/config.yaml:1 (document 0): ConfigMap/plain: data.region: variable region is not defined"; !strings.Contains(r.errOut, want) {
		t.Errorf("error lacks %q:\n%s", want, r.errOut)
	}
}

func TestBuildFetchesRemoteBasesWithAllowRemote(t *testing.T) {
	srv := testenv.NewGitServer(t)
	bases := srv.NewRepo(t, "bases")
	bases.Commit(t, "base", map[string]string{
		"base/kustomization.yaml": "resources: [cm.yaml]\n",
		"base/cm.yaml":            diffConfigMap("", "web", "v1"),
	})
	url := bases.FileURL() + "//base?ref=main"
	dir := writeFiles(t, map[string]string{"app/kustomization.yaml": "namePrefix: prod-\nresources:\n- " + url + "\n"})

	r := runBuildCommand(t, "--repo", dir).expect(t, 2)
	if !strings.Contains(r.errOut, "spec.kustomize.allowRemote is off") {
		t.Errorf("without --allow-remote, want the remote base refused; stderr:\n%s", r.errOut)
	}
	r = runBuildCommand(t, "--repo", dir, "--allow-remote").expect(t, 0)
	if want := "# Source: app/kustomization.yaml → " + bases.FileURL() + "//base/cm.yaml?ref=main\n"; !strings.Contains(r.out, want) || !strings.Contains(r.out, "name: prod-web") {
		t.Errorf("with --allow-remote, want prod-web from %s; stdout:\n%s", want, r.out)
	}
}

// A chart's error may quote a value it read from a valuesFrom Secret
// (fail, required): build --sync prints the error with the value masked,
// as the agent does in the Sync's status — build output lands in CI logs.
func TestBuildOfASyncMasksAChartErrorQuotingASecretValue(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	const password = "pw-7Hq2-Zx91-s3cr3t"
	if err := cl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-secret", Namespace: ns},
		StringData: map[string]string{"values.yaml": "password: " + password + "\n"}}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: "file:///nowhere", Branch: "main"}},
			Paths: []string{"apps"}, Interval: metav1.Duration{Duration: time.Hour}, TargetNamespace: ns},
	}); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n" +
			"  bad: {{ fail (printf \"the password %q is too weak\" .Values.password) }}\n",
		"apps/helmchart.yaml": "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata:\n  name: web\nspec:\n  chart: {path: charts/web}\n" +
			"  valuesFrom: [{kind: Secret, name: web-secret}]\n",
	}
	r := runBuildCommand(t, "--repo", writeFiles(t, files), "--sync", ns+"/web", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 2)
	if !strings.Contains(r.errOut, "is too weak") {
		t.Errorf("the chart's error is not printed:\n%s", r.errOut)
	}
	if strings.Contains(r.errOut+r.out, password) || strings.Contains(r.errOut+r.out, password[:8]) {
		t.Errorf("build shows the Secret's value:\n%s", r.errOut)
	}
}
