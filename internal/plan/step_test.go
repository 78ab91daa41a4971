package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/internal/render"
)

func TestAStepGivesBackItsObjectAsRenderedAndACopyEachTime(t *testing.T) {
	web := &unstructured.Unstructured{}
	web.SetAPIVersion("apps/v1")
	web.SetKind("Deployment")
	web.SetNamespace("shop")
	web.SetName("web")
	_ = unstructured.SetNestedField(web.Object, int64(3), "spec", "replicas")
	_ = unstructured.SetNestedStringMap(web.Object, map[string]string{"app": "web"}, "spec", "selector", "matchLabels")
	want := web.DeepCopy()
	p := New([]render.Object{encode(web, "web.yaml"), obj("v1", "ConfigMap", "shop", "settings", "cm.yaml")}, nil)

	s := p.Apply[1]
	if s.ID.Kind != "Deployment" {
		t.Fatalf("plan order %v", ids(p.Apply))
	}
	got, err := s.Desired()
	if err != nil {
		t.Fatal(err)
	}
	// Integers stay int64, as the render has them.
	if diff := cmp.Diff(want.Object, got.Object); diff != "" {
		t.Errorf("%s: decoded from the plan (-rendered +decoded):\n%s", s.ID, diff)
	}
	got.SetName("changed")
	if again, _ := s.Desired(); again.GetName() != s.ID.Name {
		t.Errorf("%s: a change to a decoded copy reached the plan", s.ID)
	}
	if s.Object.Origin.Path != "web.yaml" || s.GroupVersionKind() != want.GroupVersionKind() {
		t.Errorf("%s: origin %v, kind %v; want web.yaml, %v", s.ID, s.Object.Origin, s.GroupVersionKind(), want.GroupVersionKind())
	}
}
