package engine

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/redact"
	"github.com/driftless/driftless/internal/render"
)

// Redactor returns the Set of every Secret-derived value of a render,
// which every message about it passes through before a user or a log
// sees it: the values of vars read from a Secret (substituteFrom), the
// data and stringData of the Secrets among objects, and every string of
// an object that holds values decrypted from git or read from a Secret by
// a HelmChart's valuesFrom (render.Object.Decrypted) — except what names
// the object (apiVersion, kind, metadata.name and namespace, and any
// string equal to one of those) and driftless's own label and annotation,
// which every message names anyway. Either argument may be nil.
//
// It fails closed: an object to mask whose JSON does not decode is an
// error (the caller stops, as for a render that failed), never a Set
// without that object's values. A render's JSON always decodes; this
// guards a path that would store other bytes.
func Redactor(vars map[string]render.Variable, objects []render.Object) (*redact.Set, error) {
	values := variableValues(vars)
	for _, o := range objects {
		secret := o.GVK.GroupKind() == schema.GroupKind{Kind: "Secret"} && o.GVK.Version == "v1"
		if !secret && !o.Decrypted {
			continue
		}
		// Decoded one at a time.
		u, err := o.Decode()
		if err != nil {
			return nil, fmt.Errorf("%w; its values cannot be masked, so nothing of this render is used", err)
		}
		if secret {
			values = append(values, secretData(u.Object)...)
		}
		if o.Decrypted {
			values = append(values, decryptedStrings(u)...)
		}
	}
	return redact.New(values...), nil
}

// VariablesRedactor returns the Set of the values of vars read from a
// Secret (substituteFrom): Redactor before there is a render.
func VariablesRedactor(vars map[string]render.Variable) *redact.Set {
	return redact.New(variableValues(vars)...)
}

// variableValues returns the values of vars read from a Secret.
func variableValues(vars map[string]render.Variable) []string {
	var values []string
	for _, v := range vars {
		if v.Secret {
			values = append(values, v.Value)
		}
	}
	return values
}

// secretData returns the values of a Secret object: data decoded (and as
// written, in case it is not base64) and stringData.
func secretData(obj map[string]any) []string {
	var out []string
	data, _ := obj["data"].(map[string]any)
	for _, v := range data {
		s := fmt.Sprint(v)
		out = append(out, s)
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			out = append(out, string(b))
		}
	}
	stringData, _ := obj["stringData"].(map[string]any)
	for _, v := range stringData {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// decryptedStrings returns every string value of u but those that name
// it and driftless's own metadata.
func decryptedStrings(u *unstructured.Unstructured) []string {
	names := map[string]bool{u.GetAPIVersion(): true, u.GetKind(): true, u.GetName(): true, u.GetNamespace(): true}
	var out []string
	var walk func(v any, top bool)
	walk = func(v any, top bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, item := range v {
				if top && (k == "apiVersion" || k == "kind") {
					continue
				}
				walk(item, false)
			}
		case []any:
			for _, item := range v {
				walk(item, false)
			}
		case string:
			if !names[v] {
				out = append(out, v)
			}
		}
	}
	for k, v := range u.Object {
		if k != "metadata" {
			walk(map[string]any{k: v}, true)
		}
	}
	for k, v := range u.GetLabels() {
		if k != v1alpha1.SyncLabel && k != v1alpha1.SyncShardLabel {
			walk(v, false)
		}
	}
	for k, v := range u.GetAnnotations() {
		if k != v1alpha1.OriginAnnotation {
			walk(v, false)
		}
	}
	return out
}

// SecretRecorder is a Reader that remembers the values of every Secret it
// reads — a HelmChart's valuesFrom and chart credentials — so that what
// reads through it (a sync's render) can mask its errors with them: a
// chart's fail can quote a value from a valuesFrom Secret. A value
// that holds YAML or JSON (a values.yaml key) is remembered whole and by
// its string leaves. Safe for concurrent use.
type SecretRecorder struct {
	Reader Reader

	mu     sync.Mutex
	values []string
}

// Get reads through the Reader and remembers a Secret's values.
func (s *SecretRecorder) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := s.Reader.Get(ctx, key, obj, opts...)
	secret, ok := obj.(*corev1.Secret)
	if err != nil || !ok {
		return err
	}
	var values []string
	for _, v := range secret.Data {
		values = append(values, valueAndLeaves(string(v))...)
	}
	for _, v := range secret.StringData {
		values = append(values, valueAndLeaves(v)...)
	}
	s.mu.Lock()
	s.values = append(s.values, values...)
	s.mu.Unlock()
	return nil
}

// Values returns the values of the Secrets read so far.
func (s *SecretRecorder) Values() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.values)
}

// valueAndLeaves returns v, and when v is a YAML or JSON mapping or list,
// every string in it and every number of 8 digits or more.
func valueAndLeaves(v string) []string {
	out := []string{v}
	var doc any
	if yaml.Unmarshal([]byte(v), &doc) != nil {
		return out
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for _, item := range x {
				walk(item)
			}
		case []any:
			for _, item := range x {
				walk(item)
			}
		case string:
			out = append(out, x)
		case float64:
			// A number is a secret only when long (a PIN of 8 digits
			// or more); a short one (a port) would hide every mention.
			if n := fmt.Sprint(x); len(n) >= 8 {
				out = append(out, n)
			}
		}
	}
	switch doc.(type) {
	case map[string]any, []any:
		walk(doc)
	}
	return out
}
