package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/internal/render"
)

func obj(apiVersion, kind, namespace, name, file string) render.Object {
	return objWith(apiVersion, kind, namespace, name, file, nil)
}

// objWith is obj with the annotations given.
func objWith(apiVersion, kind, namespace, name, file string, annotations map[string]string) render.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetAnnotations(annotations)
	return encode(u, file)
}

func encode(u *unstructured.Unstructured, file string) render.Object {
	o, err := render.NewObject(u, render.Origin{Path: file})
	if err != nil {
		panic(err)
	}
	return o
}

func ids(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.ID.String())
	}
	return out
}

func TestApplyOrderComesFromKindsNeverFromFileNames(t *testing.T) {
	desired := []render.Object{
		obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "policy", "a.yaml"),
		obj("apps/v1", "Deployment", "team-a", "web", "a-deploy.yaml"),
		obj("example.com/v1", "Widget", "team-a", "w", "b.yaml"),
		obj("v1", "Service", "team-a", "web", "c.yaml"),
		obj("rbac.authorization.k8s.io/v1", "RoleBinding", "team-a", "web", "d.yaml"),
		obj("v1", "ConfigMap", "team-a", "web", "e.yaml"),
		obj("v1", "Secret", "team-a", "web", "f.yaml"),
		obj("v1", "ServiceAccount", "team-a", "web", "g.yaml"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader", "h.yaml"),
		obj("v1", "Namespace", "", "team-a", "z-namespace.yaml"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", "zz-crd.yaml"),
		obj("rbac.authorization.k8s.io/v1", "Role", "team-a", "web", "i.yaml"),
	}
	got := ids(New(desired, nil).Apply)
	want := []string{
		"CustomResourceDefinition/widgets.example.com",
		"Namespace/team-a",
		"ClusterRole/reader",
		"ServiceAccount/team-a/web",
		"Secret/team-a/web",
		"ConfigMap/team-a/web",
		"Role/team-a/web",
		"RoleBinding/team-a/web",
		"Service/team-a/web",
		"Deployment/team-a/web",
		"Widget/team-a/w",
		"ValidatingWebhookConfiguration/policy",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("apply order (-want +got):\n%s", diff)
	}
}

func TestOrderIsStableAcrossInputOrder(t *testing.T) {
	a := []render.Object{
		obj("v1", "ConfigMap", "b", "x", "1.yaml"),
		obj("v1", "ConfigMap", "a", "y", "2.yaml"),
		obj("v1", "ConfigMap", "a", "x", "3.yaml"),
	}
	b := []render.Object{a[2], a[0], a[1]}
	if diff := cmp.Diff(ids(New(a, nil).Apply), ids(New(b, nil).Apply)); diff != "" {
		t.Errorf("order depends on input order (-a +b):\n%s", diff)
	}
}

func TestPruneIsInventoryMinusDesiredInReverseOrder(t *testing.T) {
	desired := []render.Object{obj("apps/v1", "Deployment", "team-a", "web", "w.yaml")}
	previous := []Entry{
		{ID: ID{Kind: "Namespace", Name: "old"}, Version: "v1"},
		{ID: ID{Group: "apps", Kind: "Deployment", Namespace: "team-a", Name: "web"}, Version: "v1"},
		{ID: ID{Kind: "ConfigMap", Namespace: "old", Name: "cfg"}, Version: "v1"},
		{ID: ID{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition", Name: "widgets.example.com"}, Version: "v1"},
		{ID: ID{Group: "apps", Kind: "Deployment", Namespace: "old", Name: "api"}, Version: "v1"},
	}
	p := New(desired, previous)
	var got []string
	for _, e := range p.Prune {
		got = append(got, e.ID.String())
	}
	want := []string{"Deployment/old/api", "ConfigMap/old/cfg", "Namespace/old", "CustomResourceDefinition/widgets.example.com"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prune order (-want +got):\n%s", diff)
	}
}

func TestEmptyRenderAgainstAnInventoryIsRefused(t *testing.T) {
	previous := []Entry{{ID: ID{Kind: "ConfigMap", Namespace: "a", Name: "x"}, Version: "v1"}}
	tests := []struct {
		name       string
		desired    []render.Object
		previous   []Entry
		allowEmpty bool
		refused    bool
	}{
		{name: "nothing rendered, objects in inventory: refused", previous: previous, refused: true},
		{name: "nothing rendered, allowEmpty: allowed", previous: previous, allowEmpty: true},
		{name: "nothing rendered, empty inventory: nothing to refuse"},
		{name: "objects rendered: allowed", desired: []render.Object{obj("v1", "ConfigMap", "a", "y", "y.yaml")}, previous: previous},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(tt.desired, tt.previous).CheckEmpty(tt.allowEmpty)
			if refused := errors.Is(err, ErrEmptyRender); refused != tt.refused {
				t.Errorf("refused = %v (%v), want %v", refused, err, tt.refused)
			}
		})
	}
}

func TestWavesComeFirstThenKinds(t *testing.T) {
	desired := []render.Object{
		objWith("apps/v1", "Deployment", "a", "db", "db.yaml", map[string]string{"driftless.dev/wave": "0"}),
		objWith("apps/v1", "Deployment", "a", "api", "api.yaml", map[string]string{"driftless.dev/wave": "1"}),
		objWith("batch/v1", "Job", "a", "migrate", "job.yaml", map[string]string{"driftless.dev/wave": "-1"}),
		obj("v1", "Namespace", "", "a", "ns.yaml"),
	}
	p := New(desired, nil)
	var got []string
	for _, w := range p.Waves() {
		var ids []string
		for _, s := range w {
			ids = append(ids, s.ID.String())
		}
		got = append(got, strings.Join(ids, ","))
	}
	// The Namespace moves up to the earliest wave of what lives in it.
	want := []string{"Namespace/a,Job/a/migrate", "Deployment/a/db", "Deployment/a/api"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
}

func TestWhatAWorkloadNeedsMovesUpToItsWave(t *testing.T) {
	deploy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "a", "annotations": map[string]any{"driftless.dev/wave": "0"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"serviceAccountName": "runner",
			"volumes":            []any{map[string]any{"name": "cfg", "configMap": map[string]any{"name": "web-config"}}},
			"containers": []any{map[string]any{"name": "app", "envFrom": []any{
				map[string]any{"secretRef": map[string]any{"name": "web-secret"}},
			}}},
		}}},
	}}
	desired := []render.Object{
		encode(deploy, "web.yaml"),
		objWith("v1", "ConfigMap", "a", "web-config", "cm.yaml", map[string]string{"driftless.dev/wave": "5"}),
		objWith("v1", "Secret", "a", "web-secret", "s.yaml", map[string]string{"driftless.dev/wave": "3"}),
		objWith("v1", "ServiceAccount", "a", "runner", "sa.yaml", map[string]string{"driftless.dev/wave": "2"}),
		objWith("v1", "ConfigMap", "a", "unrelated", "u.yaml", map[string]string{"driftless.dev/wave": "5"}),
	}
	got := map[string]int{}
	for _, s := range New(desired, nil).Apply {
		got[s.ID.Name] = s.Wave
	}
	want := map[string]int{"web": 0, "web-config": 0, "web-secret": 0, "runner": 0, "unrelated": 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
	if ids := ids(New(desired, nil).Apply); ids[len(ids)-2] != "Deployment/a/web" {
		t.Errorf("the Deployment is not applied after what it needs: %v", ids)
	}
}

func TestInvalidWaveNamesTheFile(t *testing.T) {
	err := Validate([]render.Object{objWith("v1", "ConfigMap", "a", "x", "apps/x.yaml", map[string]string{"driftless.dev/wave": "soon"})})
	if err == nil || !strings.Contains(err.Error(), "apps/x.yaml") || !strings.Contains(err.Error(), "soon") {
		t.Errorf("Validate = %v, want an error naming the file and the value", err)
	}
}

func TestAnInventoryInGitIsRefusedNamingTheFile(t *testing.T) {
	err := Validate([]render.Object{obj("driftless.dev/v1alpha1", "Inventory", "a", "web", "apps/inventory.yaml")})
	if err == nil || !strings.Contains(err.Error(), "apps/inventory.yaml") || !strings.Contains(err.Error(), "Inventory/a/web") {
		t.Errorf("Validate = %v, want an error naming the file and the object", err)
	}
}

func TestPruneGoesInReverseWaveOrder(t *testing.T) {
	previous := []Entry{
		{ID: ID{Kind: "ConfigMap", Namespace: "a", Name: "early"}, Version: "v1", Wave: 0},
		{ID: ID{Group: "apps", Kind: "Deployment", Namespace: "a", Name: "late"}, Version: "v1", Wave: 2},
		{ID: ID{Kind: "Service", Namespace: "a", Name: "mid"}, Version: "v1", Wave: 1},
	}
	var got []string
	for _, e := range New(nil, previous).Prune {
		got = append(got, e.ID.Name)
	}
	if diff := cmp.Diff([]string{"late", "mid", "early"}, got); diff != "" {
		t.Errorf("prune order (-want +got):\n%s", diff)
	}
}
