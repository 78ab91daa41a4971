package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeScope is a cluster's discovery as a map; kinds not in it are unknown.
type fakeScope map[schema.GroupKind]bool

func (s fakeScope) Namespaced(gk schema.GroupKind) (bool, error) {
	namespaced, ok := s[gk]
	if !ok {
		return false, fmt.Errorf("no %s in discovery: %w", gk, ErrUnknownKind)
	}
	return namespaced, nil
}

var _ ScopeResolver = fakeScope(nil)

var cluster = fakeScope{
	{Kind: "ConfigMap"}:                                                        true,
	{Kind: "Namespace"}:                                                        false,
	{Group: "apps", Kind: "Deployment"}:                                        true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                  false,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:          false,
	{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}:                    true,
	{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}:                   true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}: false,
	{Group: "example.com", Kind: "List"}:                                       true,
	{Kind: "Service"}:                                                          true,
	{Kind: "Secret"}:                                                           true,
	{Group: "apps", Kind: "StatefulSet"}:                                       true,
}

// checkout writes files into a new checkout directory.
func checkout(t *testing.T, files map[string]string) string {
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

// render renders files with opts, filling in Root and, if unset, Scope.
func render(t *testing.T, files map[string]string, opts Options) ([]Object, error) {
	t.Helper()
	opts.Root = checkout(t, files)
	if opts.Scope == nil {
		opts.Scope = cluster
	}
	return Render(opts)
}

// configMap is a four-line manifest.
func configMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// rendered is what the tests compare of an object: where it came from and
// which object it is.
type rendered struct {
	Origin Origin
	Object string
}

func summarize(objs []Object) []rendered {
	var out []rendered
	for _, o := range objs {
		out = append(out, rendered{o.Origin, ref(o.decoded())})
	}
	return out
}

func messages(err error) []string {
	var out []string
	for _, e := range Errors(err) {
		out = append(out, e.Error())
	}
	return out
}

func TestRenderMarksEveryObject(t *testing.T) {
	const labelled = `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  labels: {app: web, driftless.dev/sync: someone-else}
  annotations: {note: keep, driftless.dev/origin: elsewhere}
`
	type marks struct {
		Labels      map[string]string
		Annotations map[string]string
	}
	tests := []struct {
		name string
		file string
		opts Options
		want marks
	}{{
		name: "the sync label and origin annotation are added to the object's own",
		file: "# web\n---\n" + configMap("other") + "---\n" + labelled,
		opts: Options{SyncLabel: "driftless-system.default", Revision: "0123456789abcdef0123456789abcdef01234567"},
		want: marks{
			Labels:      map[string]string{"app": "web", "driftless.dev/sync": "driftless-system.default"},
			Annotations: map[string]string{"note": "keep", "driftless.dev/origin": "app.yaml#1@0123456"},
		},
	}, {
		name: "an object without labels or annotations gets both",
		file: configMap("a"),
		opts: Options{SyncLabel: "driftless-system.default", Revision: "0123456789abcdef"},
		want: marks{
			Labels:      map[string]string{"driftless.dev/sync": "driftless-system.default"},
			Annotations: map[string]string{"driftless.dev/origin": "app.yaml#0@0123456"},
		},
	}, {
		name: "without a sync label only the origin is set",
		file: configMap("a"),
		opts: Options{Revision: "0123456789abcdef"},
		want: marks{Annotations: map[string]string{"driftless.dev/origin": "app.yaml#0@0123456"}},
	}, {
		name: "a revision shorter than 7 characters is used whole",
		file: configMap("a"),
		opts: Options{Revision: "abc"},
		want: marks{Annotations: map[string]string{"driftless.dev/origin": "app.yaml#0@abc"}},
	}, {
		name: "without a revision the origin is the path and document",
		file: configMap("a"),
		want: marks{Annotations: map[string]string{"driftless.dev/origin": "app.yaml#0"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, map[string]string{"app.yaml": tt.file}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			u := objs[len(objs)-1].decoded()
			got := marks{Labels: u.GetLabels(), Annotations: u.GetAnnotations()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("labels and annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderLeavesTheRestOfTheObjectAlone(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  paused: false
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources: {limits: {cpu: 0.5}}
`
	objs, err := render(t, map[string]string{"web.yaml": deployment}, Options{TargetNamespace: "team-a", SyncLabel: "s.t"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]any{
			"name":        "web",
			"namespace":   "team-a",
			"labels":      map[string]any{"driftless.dev/sync": "s.t"},
			"annotations": map[string]any{"driftless.dev/origin": "web.yaml#0"},
		},
		"spec": map[string]any{
			"replicas": int64(3),
			"paused":   false,
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name":      "web",
				"image":     "nginx:1.27",
				"resources": map[string]any{"limits": map[string]any{"cpu": 0.5}},
			}}}},
		},
	}
	if diff := cmp.Diff(want, objs[0].decoded().Object); diff != "" {
		t.Errorf("object (-want +got):\n%s", diff)
	}
}

func TestRenderObjectErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		opts  Options
		want  []string
	}{{
		name: "a document without kind names the file, line and document",
		files: map[string]string{
			"workloads/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n",
		},
		want: []string{"workloads/app.yaml:5 (document 1): object has no kind; every document needs apiVersion and kind"},
	}, {
		name:  "a document without apiVersion names the object",
		files: map[string]string{"app.yaml": "kind: ConfigMap\nmetadata: {name: a}\n"},
		want:  []string{"app.yaml:1 (document 0): ConfigMap/a: object has no apiVersion; every document needs apiVersion and kind"},
	}, {
		name:  "a document that is not a manifest at all",
		files: map[string]string{"values.yaml": "replicas: 3\n"},
		want:  []string{"values.yaml:1 (document 0): object has no apiVersion and no kind; every document needs apiVersion and kind"},
	}, {
		name:  "a document that is a list, not an object",
		files: map[string]string{"app.yaml": "- a\n- b\n"},
		want:  []string{"app.yaml:1 (document 0): document is a list, not an object; every document needs apiVersion and kind"},
	}, {
		name:  "a kind that is not a string",
		files: map[string]string{"app.yaml": "apiVersion: v1\nkind: 3\n"},
		want:  []string{"app.yaml:1 (document 0): kind is a number, not a string"},
	}, {
		name:  "an apiVersion with too many slashes",
		files: map[string]string{"app.yaml": "apiVersion: a/b/c\nkind: ConfigMap\nmetadata: {name: a}\n"},
		want:  []string{`app.yaml:1 (document 0): ConfigMap/a: apiVersion "a/b/c" is not valid; write group/version, or only the version for the core group`},
	}, {
		name:  "an object without metadata.name",
		files: map[string]string{"app.yaml": "apiVersion: apps/v1\nkind: Deployment\nspec: {}\n"},
		want:  []string{"app.yaml:1 (document 0): Deployment: object has no metadata.name; give it a name"},
	}, {
		name: "an object named only by generateName says to give it a name",
		files: map[string]string{
			"jobs/migrate.yaml": configMap("a") + "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\nspec: {}\n",
		},
		want: []string{`jobs/migrate.yaml:6 (document 1): Job: object has metadata.generateName "migrate-" and no metadata.name; driftless finds, updates and prunes objects by name, so give it a metadata.name`},
	}, {
		name:  "generateName next to a name is fine, without one it is not",
		files: map[string]string{"app.yaml": configMap("a") + "  generateName: a-\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: b-}\n"},
		want:  []string{`app.yaml:7 (document 1): ConfigMap: object has metadata.generateName "b-" and no metadata.name; driftless finds, updates and prunes objects by name, so give it a metadata.name`},
	}, {
		name:  "a name that is not a string",
		files: map[string]string{"app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 42}\n"},
		want:  []string{"app.yaml:1 (document 0): ConfigMap: metadata.name is a number, not a string"},
	}, {
		name:  "metadata that is not a mapping",
		files: map[string]string{"app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: web\n"},
		want:  []string{"app.yaml:1 (document 0): ConfigMap: metadata is a string, not a mapping"},
	}, {
		name:  "label values that are not strings are each named",
		files: map[string]string{"app.yaml": configMap("a") + "  labels: {version: 1, tier: web, enabled: true}\n"},
		want: []string{
			"app.yaml:1 (document 0): ConfigMap/a: metadata.labels.enabled is a boolean, not a string; quote the value",
			"app.yaml:1 (document 0): ConfigMap/a: metadata.labels.version is a number, not a string; quote the value",
		},
	}, {
		name:  "annotations that are not a mapping",
		files: map[string]string{"app.yaml": configMap("a") + "  annotations: [a]\n"},
		want:  []string{"app.yaml:1 (document 0): ConfigMap/a: metadata.annotations is a list, not a mapping"},
	}, {
		name:  "a List item that is not an object",
		files: map[string]string{"list.yaml": "apiVersion: v1\nkind: List\nitems:\n- just text\n- {apiVersion: v1, kind: ConfigMap}\n"},
		want: []string{
			"list.yaml:1 (document 0): List item 0 is a string, not an object; every document needs apiVersion and kind",
			"list.yaml:1 (document 0): ConfigMap: object has no metadata.name; give it a name",
		},
	}, {
		name:  "a List whose items are not a list",
		files: map[string]string{"list.yaml": "apiVersion: v1\nkind: List\nitems: none\n"},
		want:  []string{"list.yaml:1 (document 0): List: items is a string, not a list"},
	}, {
		name: "an object defined twice names both places",
		files: map[string]string{
			"workloads/a.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: team-a}\n",
			"workloads/b.yaml": configMap("web") + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
		},
		opts: Options{TargetNamespace: "team-a"},
		want: []string{"workloads/b.yaml:6 (document 1): Deployment/team-a/web: defined twice: workloads/a.yaml#0 and workloads/b.yaml#1; remove one"},
	}, {
		name: "an object defined twice through different API versions",
		files: map[string]string{
			"a.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n" +
				"apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: web}\n",
		},
		want: []string{"a.yaml:5 (document 1): Deployment/default/web: defined twice: a.yaml#0 and a.yaml#1; remove one"},
	}, {
		name:  "a kind the cluster does not serve",
		files: map[string]string{"workloads/x.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: foo\n"},
		want: []string{
			"workloads/x.yaml:1 (document 0): Widget.example.com/foo: unknown kind: the cluster serves no Widget in example.com/v1 and no CustomResourceDefinition in this sync defines it",
		},
	}, {
		name:  "a core kind the cluster does not serve",
		files: map[string]string{"x.yaml": "apiVersion: v1\nkind: Pdo\nmetadata: {name: foo}\n"},
		want: []string{
			"x.yaml:1 (document 0): Pdo/foo: unknown kind: the cluster serves no Pdo in v1 and no CustomResourceDefinition in this sync defines it",
		},
	}, {
		name:  "the cluster failing to say whether a kind is namespaced",
		files: map[string]string{"app.yaml": configMap("a")},
		opts:  Options{Scope: brokenScope{errors.New("discovery is unavailable")}},
		want:  []string{"app.yaml:1 (document 0): ConfigMap/a: cannot tell whether ConfigMap in v1 is namespaced: discovery is unavailable"},
	}, {
		name: "a CustomResourceDefinition with a misspelt scope",
		files: map[string]string{
			"crd.yaml":    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec: {group: example.com, names: {kind: Widget}, scope: Namespace}\n",
			"widget.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
		},
		want: []string{
			`crd.yaml:1 (document 0): CustomResourceDefinition/widgets.example.com: spec.scope is "Namespace"; set it to Namespaced or Cluster`,
			"widget.yaml:1 (document 0): Widget.example.com/w: unknown kind: the cluster serves no Widget in example.com/v1 and no CustomResourceDefinition in this sync defines it",
		},
	}, {
		name: "every problem is reported, in reading order",
		files: map[string]string{
			"a.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\nkind: [\n",
			"b.yaml": "apiVersion: v1\nmetadata: {name: b}\n---\n" + configMap("ok") + "---\n" + configMap("ok"),
		},
		opts: Options{Paths: []string{".", "missing"}, Revision: "abc1234def"},
		want: []string{
			`path "missing" not found in the repository at revision abc1234`,
			"a.yaml:1 (document 0): Widget.example.com/w: unknown kind: the cluster serves no Widget in example.com/v1 and no CustomResourceDefinition in this sync defines it",
			"a.yaml:5 (document 1): invalid YAML: line 5: did not find expected node content",
			"b.yaml:1 (document 0): object has no kind; every document needs apiVersion and kind",
			"b.yaml:9 (document 2): ConfigMap/default/ok: defined twice: b.yaml#1 and b.yaml#2; remove one",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, tt.opts)
			if objs != nil {
				t.Errorf("got %d objects with errors, want none", len(objs))
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderNeedsACheckoutAndAScope(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"a checkout that does not exist", Options{Root: filepath.Join(t.TempDir(), "gone"), Scope: cluster}},
		{"no scope resolver", Options{Root: t.TempDir()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Render(tt.opts)
			if err == nil || objs != nil {
				t.Fatalf("Render = %d objects, %v; want an error", len(objs), err)
			}
			if got := Errors(err); got != nil {
				t.Errorf("Errors = %v, want none: this is not a problem in the files", got)
			}
		})
	}
}
