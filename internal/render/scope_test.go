package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const crds = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Cluster
`

func TestRenderNamespaces(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		opts  Options
		want  []rendered
	}{{
		name:  "namespaced objects without a namespace get the target namespace",
		files: map[string]string{"app.yaml": configMap("a") + "---\n" + configMap("b") + "  namespace: other\n"},
		opts:  Options{TargetNamespace: "team-a"},
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/team-a/a"},
			{Origin{Path: "app.yaml", Doc: 1, Line: 6}, "ConfigMap/other/b"},
		},
	}, {
		name:  "without a target namespace they get default",
		files: map[string]string{"app.yaml": configMap("a")},
		want:  []rendered{{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"}},
	}, {
		name: "cluster-scoped objects lose the namespace they name",
		files: map[string]string{
			"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  namespace: team-a\n",
		},
		opts: Options{TargetNamespace: "team-b"},
		want: []rendered{{Origin{Path: "ns.yaml", Doc: 0, Line: 1}, "Namespace/team-a"}},
	}, {
		name: "a CustomResourceDefinition in the render decides the scope of its kind",
		files: map[string]string{
			"crds.yaml": crds,
			"widgets.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n" +
				"apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: team-a}\n",
		},
		want: []rendered{
			{Origin{Path: "crds.yaml", Doc: 0, Line: 1}, "CustomResourceDefinition/widgets.example.com"},
			{Origin{Path: "crds.yaml", Doc: 1, Line: 10}, "CustomResourceDefinition/gadgets.example.com"},
			{Origin{Path: "widgets.yaml", Doc: 0, Line: 1}, "Widget.example.com/default/w"},
			{Origin{Path: "widgets.yaml", Doc: 1, Line: 5}, "Gadget.example.com/g"},
		},
	}, {
		name: "the same name in another namespace or kind is another object",
		files: map[string]string{
			"a.yaml": configMap("web") + "---\n" + configMap("web") + "  namespace: team-b\n",
			"b.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
		},
		want: []rendered{
			{Origin{Path: "a.yaml", Doc: 0, Line: 1}, "ConfigMap/default/web"},
			{Origin{Path: "a.yaml", Doc: 1, Line: 6}, "ConfigMap/team-b/web"},
			{Origin{Path: "b.yaml", Doc: 0, Line: 1}, "Deployment/default/web"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

type brokenScope struct{ err error }

func (s brokenScope) Namespaced(schema.GroupKind) (bool, error) { return false, s.err }

// countingScope counts the questions it is asked.
type countingScope struct {
	fakeScope
	asked int
}

func (s *countingScope) Namespaced(gk schema.GroupKind) (bool, error) {
	s.asked++
	return s.fakeScope.Namespaced(gk)
}

func TestRenderAsksTheClusterOncePerKind(t *testing.T) {
	scope := &countingScope{fakeScope: cluster}
	files := map[string]string{
		"a.yaml": configMap("a") + "---\n" + configMap("b") + "---\n" + configMap("c"),
		"w.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: v}\n",
	}
	if _, err := render(t, files, Options{Scope: scope}); len(Errors(err)) != 2 {
		t.Fatalf("want an unknown kind error for each Widget, got %v", err)
	}
	if scope.asked != 2 {
		t.Errorf("asked the cluster %d times for 2 kinds, want 2", scope.asked)
	}
}
