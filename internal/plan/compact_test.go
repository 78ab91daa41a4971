package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/internal/render"
)

func TestACompactPlanGivesBackEachObjectAsRenderedAndKeepsItsOrder(t *testing.T) {
	web := obj("apps/v1", "Deployment", "shop", "web", "web.yaml")
	_ = unstructured.SetNestedField(web.Object.Object, int64(3), "spec", "replicas")
	_ = unstructured.SetNestedStringMap(web.Object.Object, map[string]string{"app": "web"}, "spec", "selector", "matchLabels")
	cm := obj("v1", "ConfigMap", "shop", "settings", "cm.yaml")
	shared := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"shop"}}`)
	p := New([]render.Object{web, cm}, nil)
	c := p.Compact(map[ID][]byte{IDOf(cm.Object): shared})

	if diff := cmp.Diff(ids(p.Apply), ids(c.Apply)); diff != "" {
		t.Errorf("the compact plan's order differs (-plan +compact):\n%s", diff)
	}
	for i, s := range c.Apply {
		if !s.Compacted() {
			t.Errorf("%s: still decoded in the compact plan", s.ID)
		}
		if p.Apply[i].Object.Object == nil {
			t.Errorf("%s: Compact changed the plan it was called on", s.ID)
		}
		got, err := s.Desired()
		if err != nil {
			t.Fatal(err)
		}
		// Integers stay int64, as the render has them.
		if diff := cmp.Diff(p.Apply[i].Object.Object.Object, got.Object); diff != "" {
			t.Errorf("%s: decoded from the compact plan (-rendered +decoded):\n%s", s.ID, diff)
		}
		got.SetName("changed")
		if again, _ := s.Desired(); again.GetName() != s.ID.Name {
			t.Errorf("%s: a change to a decoded copy reached the plan", s.ID)
		}
		if s.Object.Origin != p.Apply[i].Object.Origin || s.GroupVersionKind() != p.Apply[i].Object.Object.GroupVersionKind() {
			t.Errorf("%s: origin %v, kind %v; want %v, %v", s.ID, s.Object.Origin, s.GroupVersionKind(), p.Apply[i].Object.Origin, p.Apply[i].Object.Object.GroupVersionKind())
		}
	}
	if diff := cmp.Diff(p.Inventory(), c.Inventory()); diff != "" {
		t.Errorf("the compact plan's inventory differs (-plan +compact):\n%s", diff)
	}
}
