package apply_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// An immutable field (the data of an immutable ConfigMap, the template of
// a Job) cannot be changed in place: driftless deletes and re-creates the
// object only when it carries driftless.dev/force: enabled.
func TestImmutableChangesNeedTheForceAnnotation(t *testing.T) {
	kinds := []struct {
		kind, apiVersion, name, path string
		// manifest has "$VALUE" where v1 and v2 differ and "$FORCE" where
		// the force annotation goes.
		manifest string
		value    func(*unstructured.Unstructured) string
	}{
		{
			kind: "ConfigMap", apiVersion: "v1", name: "frozen", path: "config/frozen.yaml",
			manifest: `
apiVersion: v1
kind: ConfigMap
metadata: {name: frozen, namespace: $NS, annotations: {$FORCE}}
immutable: true
data: {color: $VALUE}
`,
			value: func(u *unstructured.Unstructured) string {
				s, _, _ := unstructured.NestedString(u.Object, "data", "color")
				return s
			},
		},
		{
			kind: "Job", apiVersion: "batch/v1", name: "migrate", path: "jobs/migrate.yaml",
			manifest: `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: $NS, annotations: {$FORCE}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: "migrate:$VALUE"}]
`,
			value: func(u *unstructured.Unstructured) string {
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				if len(cs) == 0 {
					return ""
				}
				image, _ := cs[0].(map[string]any)["image"].(string)
				return strings.TrimPrefix(image, "migrate:")
			},
		},
	}
	for _, k := range kinds {
		version := func(value string, force bool) string {
			ann := ""
			if force {
				ann = "driftless.dev/force: enabled"
			}
			return strings.NewReplacer("$VALUE", value, "$FORCE", ann).Replace(k.manifest)
		}
		t.Run("without the annotation, a "+k.kind+" is refused and left as it is", func(t *testing.T) {
			ns := env.Namespace(t)
			m := newManager(ns)
			applyOK(t, m, planOf(fromGit(t, ns, k.path, version("blue", false))))
			before := mustGet(t, k.apiVersion, k.kind, ns, k.name)

			_, err := m.Apply(context.Background(), planOf(fromGit(t, ns, k.path, version("green", false))))

			validationError(t, err)
			expectContains(t, err, k.kind+"/"+ns+"/"+k.name+" ("+k.path+"#0)", "immutable",
				"annotate the object with driftless.dev/force: enabled")
			after := mustGet(t, k.apiVersion, k.kind, ns, k.name)
			if after.GetUID() != before.GetUID() {
				t.Error("the object was re-created")
			}
			if got := k.value(after); got != "blue" {
				t.Errorf("value = %q, want it left as blue", got)
			}
		})
		t.Run("with the annotation, a "+k.kind+" is deleted and re-created", func(t *testing.T) {
			ns := env.Namespace(t)
			m := newManager(ns)
			applyOK(t, m, planOf(fromGit(t, ns, k.path, version("blue", true))))
			before := mustGet(t, k.apiVersion, k.kind, ns, k.name)

			cs := applyOK(t, m, planOf(fromGit(t, ns, k.path, version("green", true))))

			expectActions(t, cs, k.kind+"/"+ns+"/"+k.name+" Configured")
			if !strings.Contains(cs[0].Reason, "re-created") {
				t.Errorf("Reason = %q, want it to say the object was re-created", cs[0].Reason)
			}
			after := mustGet(t, k.apiVersion, k.kind, ns, k.name)
			if after.GetUID() == before.GetUID() {
				t.Error("the object kept its UID: it was not re-created")
			}
			if got := k.value(after); got != "green" {
				t.Errorf("value = %q, want green", got)
			}
		})
	}

	t.Run("a forced re-create whose replacement is invalid deletes nothing", func(t *testing.T) {
		ns := env.Namespace(t)
		m := newManager(ns)
		frozen := func(data string) string {
			return `
apiVersion: v1
kind: ConfigMap
metadata: {name: frozen, namespace: $NS, annotations: {driftless.dev/force: enabled}}
immutable: true
data: ` + data
		}
		applyOK(t, m, planOf(fromGit(t, ns, "config/frozen.yaml", frozen("{color: blue}"))))
		before := mustGet(t, "v1", "ConfigMap", ns, "frozen")

		// The data changes (immutable) and gains a key that no ConfigMap
		// may have.
		_, err := m.Apply(context.Background(), planOf(fromGit(t, ns, "config/frozen.yaml", frozen(`{color: green, "not a key!": x}`))))

		validationError(t, err)
		expectContains(t, err, "ConfigMap/"+ns+"/frozen (config/frozen.yaml#0)", "the re-created object would be refused", "not a key!")
		after := get(t, "v1", "ConfigMap", ns, "frozen")
		if after == nil || after.GetUID() != before.GetUID() {
			t.Fatal("the object was deleted although its replacement is invalid")
		}
		if got := configMapData(t, ns, "frozen")["color"]; got != "blue" {
			t.Errorf("color = %q, want it left as blue", got)
		}
	})
}
