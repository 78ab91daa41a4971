package apply_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/internal/apply"
)

func TestParsePointer(t *testing.T) {
	tests := []struct {
		name    string
		pointer string
		want    []string
	}{
		{name: "a plain path is split at each slash", pointer: "/spec/replicas", want: []string{"spec", "replicas"}},
		{name: "~1 in a key is a slash", pointer: "/metadata/annotations/example.com~1note", want: []string{"metadata", "annotations", "example.com/note"}},
		{name: "~0 in a key is a tilde", pointer: "/spec/settings/a~0b", want: []string{"spec", "settings", "a~b"}},
		{name: "~01 is a tilde followed by 1, not a slash", pointer: "/spec/~01", want: []string{"spec", "~1"}},
		{name: "a list index is a segment", pointer: "/spec/template/spec/containers/0/image", want: []string{"spec", "template", "spec", "containers", "0", "image"}},
		{name: "an empty key is a segment", pointer: "/data/", want: []string{"data", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := apply.ParsePointer(tt.pointer)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParsePointer(%q) (-want +got):\n%s", tt.pointer, diff)
			}
		})
	}
}

func TestParsePointerRefusesWhatIsNotAPointerToAField(t *testing.T) {
	for _, ptr := range []string{"spec/replicas", "", "/", ".spec.replicas"} {
		_, err := apply.ParsePointer(ptr)
		expectContains(t, err, "is not a JSON pointer to a field", "write it like /spec/replicas")
	}
}

func TestIgnoredFieldsAreNeitherWrittenNorCompared(t *testing.T) {
	ns := env.Namespace(t)
	m := newManager(ns)
	settings := func(color, size string) string {
		return `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: $NS
  annotations: {driftless.dev/ignore-fields: /data/size}
data: {color: ` + color + `, size: ` + size + `}
`
	}
	p := planOf(fromGit(t, ns, "config/settings.yaml", settings("blue", "small")))

	expectActions(t, applyOK(t, m, p), "ConfigMap/"+ns+"/settings Created")
	if got, ok := configMapData(t, ns, "settings")["size"]; ok {
		t.Fatalf("the ignored field was written: size = %q", got)
	}

	live := mustGet(t, "v1", "ConfigMap", ns, "settings")
	editByHand(t, live, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "large", "data", "size")
	})
	expectActions(t, applyOK(t, m, p), "ConfigMap/"+ns+"/settings Unchanged")

	// A new value in git for the ignored field is no difference either.
	p = planOf(fromGit(t, ns, "config/settings.yaml", settings("blue", "medium")))
	expectActions(t, applyOK(t, m, p), "ConfigMap/"+ns+"/settings Unchanged")
	if diff := cmp.Diff(map[string]string{"color": "blue", "size": "large"}, configMapData(t, ns, "settings")); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}

	// The other fields are still driftless's.
	p = planOf(fromGit(t, ns, "config/settings.yaml", settings("green", "medium")))
	expectActions(t, applyOK(t, m, p), "ConfigMap/"+ns+"/settings Configured")
	if diff := cmp.Diff(map[string]string{"color": "green", "size": "large"}, configMapData(t, ns, "settings")); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}

func TestAFieldDriftlessWroteKeepsItsLiveValueOnceIgnored(t *testing.T) {
	ns := env.Namespace(t)
	m := newManager(ns)
	applyOK(t, m, planOf(fromGit(t, ns, "config/settings.yaml", `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: $NS}
data: {replicas: "2"}
`)))
	// Server-side apply removes a field its only manager stops sending;
	// ignoring it must not.
	ignoring := planOf(fromGit(t, ns, "config/settings.yaml", `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: $NS
  annotations: {driftless.dev/ignore-fields: /data/replicas}
data: {}
`))

	applyOK(t, m, ignoring)
	if got, ok := configMapData(t, ns, "settings")["replicas"]; got != "2" {
		t.Fatalf("replicas = %q (present: %v), want the 2 it had", got, ok)
	}

	live := mustGet(t, "v1", "ConfigMap", ns, "settings")
	editByHand(t, live, func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "5", "data", "replicas")
	})
	expectActions(t, applyOK(t, m, ignoring), "ConfigMap/"+ns+"/settings Unchanged")
	if got := configMapData(t, ns, "settings")["replicas"]; got != "5" {
		t.Errorf("replicas = %q, want the 5 set by hand", got)
	}
}

// Each case creates the object from git, lets a person change the
// ignored field, applies git again and expects the person's value to stay.
func TestIgnoreFieldsPointers(t *testing.T) {
	tests := []struct {
		name     string
		crd      bool
		manifest string
		// first, when set, is the version in git that creates the object.
		first string
		edit  func(*unstructured.Unstructured)
		// read returns the field that must keep the person's value.
		read func(*unstructured.Unstructured) any
		want any
	}{
		{
			name: "a slash in an annotation key is written ~1",
			manifest: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: subject
  namespace: $NS
  annotations:
    driftless.dev/ignore-fields: /metadata/annotations/example.com~1note
    example.com/note: from git
`,
			edit: func(u *unstructured.Unstructured) {
				ann := u.GetAnnotations()
				ann["example.com/note"] = "by hand"
				u.SetAnnotations(ann)
			},
			read: func(u *unstructured.Unstructured) any { return u.GetAnnotations()["example.com/note"] },
			want: "by hand",
		},
		{
			name: "a tilde in a key is written ~0 and a slash ~1",
			crd:  true,
			manifest: `
apiVersion: $NS.example.com/v1
kind: Gadget
metadata:
  name: subject
  namespace: $NS
  annotations: {driftless.dev/ignore-fields: "/spec/settings/a~0b, /spec/settings/c~1d"}
spec:
  settings: {"a~b": git, "c/d": git, plain: git}
`,
			edit: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"a~b": "hand", "c/d": "hand", "plain": "git"}, "spec", "settings")
			},
			read: func(u *unstructured.Unstructured) any {
				m, _, _ := unstructured.NestedStringMap(u.Object, "spec", "settings")
				return m
			},
			want: map[string]string{"a~b": "hand", "c/d": "hand", "plain": "git"},
		},
		{
			name: "a list index reaches into a list item",
			// A container without an image is invalid, so git's first
			// version does not ignore it yet.
			first:    deployment(""),
			manifest: deployment("{driftless.dev/ignore-fields: /spec/template/spec/containers/0/image}"),
			edit: func(u *unstructured.Unstructured) {
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				cs[0].(map[string]any)["image"] = "app:1.1-hotfix"
				_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
			},
			read: func(u *unstructured.Unstructured) any {
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				return cs[0].(map[string]any)["image"]
			},
			want: "app:1.1-hotfix",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			m := newManager(ns)
			if tt.crd {
				installGadgets(t, ns)
			}
			obj := fromGit(t, ns, "subject.yaml", tt.manifest)
			first := obj
			if tt.first != "" {
				first = fromGit(t, ns, "subject.yaml", tt.first)
			}
			applyOK(t, m, planOf(first))
			live := mustGet(t, obj.GVK.GroupVersion().String(), obj.GVK.Kind, ns, "subject")
			editByHand(t, live, tt.edit)

			applyOK(t, m, planOf(obj))
			cs := applyOK(t, m, planOf(obj))

			expectActions(t, cs, obj.GVK.Kind+"/"+ns+"/subject Unchanged")
			got := tt.read(mustGet(t, obj.GVK.GroupVersion().String(), obj.GVK.Kind, ns, "subject"))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ignored field (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIgnoreFieldsPointerToAMissingFieldIsFine(t *testing.T) {
	ns := env.Namespace(t)
	p := planOf(fromGit(t, ns, "config/settings.yaml", `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: $NS
  annotations: {driftless.dev/ignore-fields: "/data/absent,/spec/replicas,/data/color/deeper"}
data: {color: blue}
`))

	expectActions(t, applyOK(t, newManager(ns), p), "ConfigMap/"+ns+"/settings Created")
	if got := configMapData(t, ns, "settings")["color"]; got != "blue" {
		t.Errorf("color = %q, want blue", got)
	}
}

func TestIgnoreFieldsInvalidPointerFailsValidationNamingTheAnnotation(t *testing.T) {
	ns := env.Namespace(t)
	p := planOf(
		fromGit(t, ns, "config/settings.yaml", `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: $NS
  annotations: {driftless.dev/ignore-fields: "data/color"}
data: {color: blue}
`),
		fromGit(t, ns, "config/other.yaml", `{apiVersion: v1, kind: ConfigMap, metadata: {name: other, namespace: $NS}}`),
	)

	_, err := newManager(ns).Apply(context.Background(), p)

	expectContains(t, err, "ConfigMap/"+ns+"/settings (config/settings.yaml#0)",
		"annotation driftless.dev/ignore-fields", `"data/color" is not a JSON pointer`, "/spec/replicas")
	if get(t, "v1", "ConfigMap", ns, "other") != nil {
		t.Error("the valid ConfigMap of the same plan was created")
	}
	validationError(t, err)
}

func deployment(annotations string) string {
	if annotations == "" {
		annotations = "{}"
	}
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: subject, namespace: $NS, annotations: ` + annotations + `}
spec:
  selector: {matchLabels: {app: subject}}
  template:
    metadata: {labels: {app: subject}}
    spec:
      containers: [{name: app, image: "app:1.0", args: [--from-git]}]
`
}
