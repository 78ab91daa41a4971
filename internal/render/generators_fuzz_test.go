package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/driftless/driftless/api/v1alpha1"
)

// fuzzRepository is a small repository that fuzzed kustomizations and
// HelmCharts can name: a base with a Deployment, a chart, a values file.
var fuzzRepository = map[string]string{
	"base/kustomization.yaml": "resources: [deployment.yaml]\n",
	"base/deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1}\n",
	"base/patch.yaml":         "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
	"base/app.env":            "A=1\n",
	"charts/web/Chart.yaml":   "apiVersion: v2\nname: web\nversion: 1.0.0\n",
	"charts/web/values.yaml":  "replicas: 1\ngreeting: hi\n",
	"charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n" +
		"data:\n  greeting: {{ .Values.greeting | quote }}\n  replicas: {{ .Values.replicas | quote }}\n",
	"values/prod.yaml": "greeting: hello\n",
}

// checkFuzzedRender is what every fuzzed render must hold to: objects and
// no error, or an error made of *Error and no objects, and every object
// complete and marked.
func checkFuzzedRender(t *testing.T, objs []Object, err error) {
	t.Helper()
	if err != nil {
		if objs != nil {
			t.Errorf("got objects and an error")
		}
		if len(Errors(err)) == 0 {
			t.Errorf("error %v holds no *Error", err)
		}
		return
	}
	for _, o := range objs {
		u := o.decoded()
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			t.Errorf("incomplete object %v", u.Object)
		}
		if u.GetLabels()[v1alpha1.SyncLabel] != "s.t" || u.GetAnnotations()[v1alpha1.OriginAnnotation] == "" {
			t.Errorf("object %s is not marked", ref(u))
		}
	}
}

// A kustomization is untrusted input: whatever it says, a render ends
// with objects or with errors that name where, never a panic, never a
// read outside the repository, never a fetch.
func FuzzKustomization(f *testing.F) {
	for _, seed := range []string{
		"resources: [../base]\n",
		"resources: [../base]\nnamePrefix: a-\npatches: [{path: ../base/patch.yaml}]\n",
		"resources: [../base]\nconfigMapGenerator: [{name: c, literals: [A=1]}]\nsecretGenerator: [{name: s, envs: [../base/app.env]}]\n",
		"resources: [https://example.com/x.yaml]\n",
		"resources: [../../etc]\n",
		"resources: [/etc/passwd]\n",
		"components: [../base]\n",
		"helmCharts: [{name: x}]\n",
		"generators: [{apiVersion: x, kind: Y}]\n",
		"replacements: [{source: {kind: Deployment}, targets: [{select: {kind: ConfigMap}}]}]\n",
		"openapi: {path: ../base/deployment.yaml}\n",
		"resources: [../base]\nimages: [{name: nginx, newTag: '1.2'}]\nreplicas: [{name: web, count: 3}]\n",
		"a: &a [*a, *a]\n",
		"resources: [../base, ../base]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, kustomization []byte) {
		root := checkout(t, fuzzRepository)
		dir := filepath.Join(root, "apps", "app")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), kustomization, 0o644); err != nil {
			t.Fatal(err)
		}
		objs, err := Render(Options{Root: root, Paths: []string{"apps"}, Scope: cluster, SyncLabel: "s.t", Revision: "0123456789",
			Budgets: Budgets{MaxFiles: 50, MaxDocuments: 200, MaxObjects: 200, MaxBytes: 1 << 20}})
		checkFuzzedRender(t, objs, err)
	})
}

// A HelmChart and the values it takes are untrusted input too.
func FuzzHelmChart(f *testing.F) {
	for _, seed := range []struct{ chart, values string }{
		{"spec: {chart: {path: charts/web}}\n", ""},
		{"spec: {chart: {path: charts/web}, valuesFiles: [values/prod.yaml]}\n", ""},
		{"spec: {chart: {path: charts/web}, values: {replicas: 3}}\n", ""},
		{"spec: {chart: {path: charts/web}, valuesFiles: [values/fuzz.yaml]}\n", "greeting: [1, 2]\n"},
		{"spec: {chart: {path: charts/web}, valuesFiles: [values/fuzz.yaml]}\n", "a: &a [*a, *a]\n"},
		{"spec: {chart: {path: ../../etc}}\n", ""},
		{"spec: {chart: {path: charts/web}, valuesFiles: [/etc/passwd]}\n", ""},
		{"spec: {chart: {repository: 'http://127.0.0.1:1', name: web}}\n", ""},
		{"spec: {chart: {path: charts/web}, includeCRDs: true, unknown: 1}\n", ""},
	} {
		f.Add([]byte(seed.chart), []byte(seed.values))
	}
	f.Fuzz(func(t *testing.T, spec, values []byte) {
		files := map[string]string{"values/fuzz.yaml": string(values)}
		for k, v := range fuzzRepository {
			files[k] = v
		}
		files["apps/web.yaml"] = "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: web}\n" + string(spec)
		root := checkout(t, files)
		objs, err := Render(Options{Root: root, Paths: []string{"apps"}, Scope: cluster, SyncLabel: "s.t", Revision: "0123456789",
			Budgets: Budgets{MaxFiles: 50, MaxDocuments: 200, MaxObjects: 200, MaxBytes: 1 << 20}})
		checkFuzzedRender(t, objs, err)
	})
}
