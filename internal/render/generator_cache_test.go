package render

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
)

// apps is a repository of n overlays of one shared base, each with a
// configMapGenerator.
func apps(n int) map[string]string {
	files := map[string]string{
		"base/kustomization.yaml": "resources: [deployment.yaml]\n",
		"base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, envFrom: [{configMapRef: {name: config}}]}]
`,
		"shared/patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
	}
	for i := range n {
		files[fmt.Sprintf("apps/app-%02d/kustomization.yaml", i)] = fmt.Sprintf(`namePrefix: app-%02d-
resources: [../../base]
patches: [{path: ../../shared/patch.yaml}]
configMapGenerator:
- name: config
  literals: [GREETING=hello]
`, i)
	}
	return files
}

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A render with a GeneratorCache builds again only the kustomizations
// whose files changed, and renders exactly what a render without the
// cache renders: after a change to one overlay, to the shared base, to a
// patch outside every kustomization directory, and after a new file in a
// base directory.
func TestTheGeneratorCacheBuildsAgainOnlyWhatChanged(t *testing.T) {
	files := apps(10)
	root := checkout(t, files)
	cache := NewGeneratorCache()
	opts := Options{Root: root, Paths: []string{"apps"}, Scope: cluster, Revision: "0123456789"}
	renderWith := func(c *GeneratorCache) []Object {
		t.Helper()
		o := opts
		o.Cache = c
		objs, err := Render(o)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	step := func(name string, change map[string]string, wantBuilt int64) {
		t.Helper()
		write(t, root, change)
		maps.Copy(files, change)
		built, reused := cache.Builds()
		got := renderWith(cache)
		b, r := cache.Builds()
		if b-built != wantBuilt || b-built+r-reused != 10 {
			t.Errorf("%s: %d kustomizations built and %d reused, want %d built of 10", name, b-built, r-reused, wantBuilt)
		}
		want := renderWith(nil)
		if len(got) != len(want) {
			t.Fatalf("%s: %d objects with the cache, %d without", name, len(got), len(want))
		}
		for i := range got {
			if !equality.Semantic.DeepEqual(got[i].decoded().Object, want[i].decoded().Object) || got[i].Origin != want[i].Origin {
				t.Errorf("%s: object %d differs with the cache:\n%v\nwithout:\n%v", name, i, got[i].decoded().Object, want[i].decoded().Object)
			}
		}
	}
	step("first render", nil, 10)
	step("nothing changed", nil, 0)
	step("one overlay's literal", map[string]string{"apps/app-03/kustomization.yaml": `namePrefix: app-03-
resources: [../../base]
patches: [{path: ../../shared/patch.yaml}]
configMapGenerator:
- name: config
  literals: [GREETING=bonjour]
`}, 1)
	step("the shared base", map[string]string{"base/deployment.yaml": files["base/deployment.yaml"] + "  replicas: 3\n"}, 10)
	step("a patch outside every kustomization directory", map[string]string{"shared/patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 4}\n"}, 10)
	step("a file no kustomization names, in the base directory", map[string]string{"base/notes.md": "a note\n"}, 10)
	step("an unrelated file", map[string]string{"README.md": "hello\n"}, 0)
}

// Settling changes the objects of a render (namespace, labels, variables):
// what the cache hands out again is as the build made it.
func TestTheGeneratorCacheHandsOutObjectsAsBuilt(t *testing.T) {
	root := checkout(t, apps(1))
	cache := NewGeneratorCache()
	opts := Options{Root: root, Paths: []string{"apps"}, Scope: cluster, Cache: cache, SyncLabel: "ns.first", TargetNamespace: "one"}
	if _, err := Render(opts); err != nil {
		t.Fatal(err)
	}
	opts.SyncLabel, opts.TargetNamespace = "ns.second", "two"
	objs, err := Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, reused := cache.Builds(); reused != 1 {
		t.Fatalf("the second render reused %d builds, want 1", reused)
	}
	for _, o := range objs {
		if o.decoded().GetNamespace() != "two" || o.decoded().GetLabels()["driftless.dev/sync"] != "ns.second" {
			t.Errorf("%s: namespace %q, label %q: settled with the first render's options", ref(o.decoded()), o.decoded().GetNamespace(), o.decoded().GetLabels()["driftless.dev/sync"])
		}
	}
}
