package engine

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/render"
)

func TestRedactorHidesSecretValuesInAnErrorAndKeepsItsKind(t *testing.T) {
	vars := map[string]render.Variable{"pw": {Value: `hun"ter2`, Secret: true}, "env": {Value: "prod"}}
	cause := &apply.ValidationError{Errs: []*apply.ObjectError{{Err: errors.New(`metadata.labels: Invalid value: "hun\"ter2": must match ^[a-z]+$ in prod`)}}}
	err := VariablesRedactor(vars).Error(cause)
	if want := `metadata.labels: Invalid value: "***": must match ^[a-z]+$ in prod`; !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want it to hold %s", err, want)
	}
	var ve *apply.ValidationError
	if !errors.As(err, &ve) {
		t.Error("the masked error no longer is a *ValidationError")
	}
}

func TestRedactorKnowsSecretsAndDecryptedValuesButNotNames(t *testing.T) {
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db", "namespace": "apps"},
		"data":       map[string]any{"a": "ZGF0YS12YWx1ZS0x"}, // data-value-1
		"stringData": map[string]any{"b": "string-data-value"},
	}}
	decrypted := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "apps",
			"labels": map[string]any{"tier": "decrypted-label"}, "annotations": map[string]any{"driftless.dev/origin": "apps/settings.yaml"}},
		"data": map[string]any{"k": "decrypted-value", "same": "settings"},
	}}
	secretObject, err := render.NewObject(secret, render.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	decryptedObject, err := render.NewObject(decrypted, render.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	decryptedObject.Decrypted = true
	set, err := Redactor(nil, []render.Object{secretObject, decryptedObject})
	if err != nil {
		t.Fatal(err)
	}
	msg := "Secret/apps/db data-value-1 string-data-value; ConfigMap/apps/settings decrypted-value decrypted-label from apps/settings.yaml"
	want := "Secret/apps/db *** ***; ConfigMap/apps/settings *** *** from apps/settings.yaml"
	if got := set.String(msg); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// An object to mask whose JSON does not decode fails the Redactor (the
// sync stops, BuildFailed): it never returns a Set that would let that
// object's values through unmasked.
func TestRedactorFailsClosedOnAnObjectThatDoesNotDecode(t *testing.T) {
	broken := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"apps"},"stringData":{"password":"hunter2"}`)
	tests := []struct {
		name string
		obj  render.Object
	}{
		{"a Secret", render.Object{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespace: "apps", Name: "db", JSON: broken,
			Origin: render.Origin{Path: "apps/db.yaml"}}},
		{"a decrypted object", render.Object{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "apps", Name: "db", JSON: broken,
			Origin: render.Origin{Path: "apps/db.yaml"}, Decrypted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Redactor(nil, []render.Object{tt.obj})
			if err == nil {
				t.Fatalf("Redactor returned a Set (hunter2 → %q) and no error; want an error", set.String("hunter2"))
			}
			if msg := err.Error(); !strings.Contains(msg, tt.obj.Ref().String()+" (apps/db.yaml#0): cannot be decoded") ||
				!strings.Contains(msg, "cannot be masked") || strings.Contains(msg, "hunter2") {
				t.Errorf("error = %q; want it to name the object and its file, say its values cannot be masked, and not quote them", msg)
			}
		})
	}
}
