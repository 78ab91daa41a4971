package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/driftless/driftless/api/v1alpha1"
)

// addValue adds the object in v, a decoded document or List item, to r,
// expanding a v1 List into its items. what names v in errors. data, when
// not nil, is the JSON v was decoded from, which r then holds instead of
// encoding v again.
func (r *renderer) addValue(o Origin, what string, v any, data []byte) {
	obj, ok := v.(map[string]any)
	if !ok {
		r.fail(o, "", fmt.Errorf("%s is %s, not an object; every document needs apiVersion and kind", what, describe(v)))
		return
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() == "v1" && u.GetKind() == "List" {
		items, ok := obj["items"].([]any)
		if !ok && obj["items"] != nil {
			r.fail(o, "List", fmt.Errorf("items is %s, not a list", describe(obj["items"])))
			return
		}
		for i, item := range items {
			if r.over {
				return
			}
			r.addValue(o, fmt.Sprintf("List item %d", i), item, nil)
		}
		return
	}
	problems := check(obj)
	for _, err := range problems {
		r.fail(o, ref(u), err)
	}
	if len(problems) == 0 && r.countObject(o, ref(u)) {
		r.hold(u, o, data)
	}
}

// pending is an object read and checked, not yet settled: held as its
// JSON, as its generator made it, until settle has seen every object's
// kind and decodes it again.
type pending struct {
	json      []byte
	origin    Origin
	ref       string // ref of the object, for errors
	crd       bool   // a CustomResourceDefinition
	decrypted bool
}

// decode returns the object p holds, decoded.
func (p pending) decode() (*unstructured.Unstructured, error) {
	u, err := decodeObject(p.json)
	if err != nil {
		return nil, fmt.Errorf("cannot be decoded again: %w", err)
	}
	return u, nil
}

// hold adds u, from o, to the objects to settle, as JSON (data, or u
// encoded when data is nil): a render holds no more than one object
// decoded at a time.
func (r *renderer) hold(u *unstructured.Unstructured, o Origin, data []byte) {
	if data == nil {
		var err error
		if data, err = json.Marshal(u.Object); err != nil {
			r.fail(o, ref(u), fmt.Errorf("cannot be encoded as JSON: %w", err))
			return
		}
	}
	r.pending = append(r.pending, pending{json: data, origin: o, ref: ref(u), crd: u.GroupVersionKind().GroupKind() == crdKind})
}

// check returns what is wrong with obj's type and object metadata: the
// fields driftless reads or writes before the API server sees the object.
func check(obj map[string]any) []error {
	apiVersion, errV := stringField(obj, "", "apiVersion")
	kind, errK := stringField(obj, "", "kind")
	if err := errors.Join(errV, errK); err != nil {
		return []error{err}
	}
	const need = "every document needs apiVersion and kind"
	switch {
	case apiVersion == "" && kind == "":
		return []error{errors.New("object has no apiVersion and no kind; " + need)}
	case apiVersion == "":
		return []error{errors.New("object has no apiVersion; " + need)}
	case kind == "":
		return []error{errors.New("object has no kind; " + need)}
	}
	if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
		return []error{fmt.Errorf("apiVersion %q is not valid; write group/version, or only the version for the core group", apiVersion)}
	}

	meta, ok := obj["metadata"].(map[string]any)
	if !ok && obj["metadata"] != nil {
		return []error{fmt.Errorf("metadata is %s, not a mapping", describe(obj["metadata"]))}
	}
	name, errN := stringField(meta, "metadata.", "name")
	generateName, errG := stringField(meta, "metadata.", "generateName")
	_, errNS := stringField(meta, "metadata.", "namespace")
	errs := []error{errN, errG, errNS}
	switch {
	case name != "" || errN != nil || errG != nil:
	case generateName != "":
		errs = append(errs, fmt.Errorf("object has metadata.generateName %q and no metadata.name; driftless finds, updates and prunes objects by name, so give it a metadata.name", generateName))
	default:
		errs = append(errs, errors.New("object has no metadata.name; give it a name"))
	}
	for _, field := range []string{"labels", "annotations"} {
		errs = append(errs, stringMap(meta, field)...)
	}
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// stringField returns m[key], or "" when it is absent, and an error naming
// the field when it is not a string.
func stringField(m map[string]any, prefix, key string) (string, error) {
	switch v := m[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", fmt.Errorf("%s%s is %s, not a string", prefix, key, describe(v))
	}
}

// stringMap returns an error for each value of metadata.<field> that is not
// a string, as a label such as "version: 1" is.
func stringMap(meta map[string]any, field string) []error {
	v := meta[field]
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []error{fmt.Errorf("metadata.%s is %s, not a mapping", field, describe(v))}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if _, ok := m[k].(string); !ok {
			errs = append(errs, fmt.Errorf("metadata.%s.%s is %s, not a string; quote the value", field, k, describe(m[k])))
		}
	}
	return errs
}

// describe says what kind of value v is, without echoing it.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "empty"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

// ref names an object "Kind/namespace/name" for people, leaving out what
// is not known. The API group follows the kind unless it is one of
// Kubernetes' own (no dot, or ending in .k8s.io): "Widget.example.com/foo".
func ref(u *unstructured.Unstructured) string {
	kind := u.GetKind()
	if kind == "" {
		return ""
	}
	if gv, err := schema.ParseGroupVersion(u.GetAPIVersion()); err == nil &&
		strings.Contains(gv.Group, ".") && !strings.HasSuffix(gv.Group, ".k8s.io") {
		kind += "." + gv.Group
	}
	name := u.GetName()
	switch {
	case name == "":
		return kind
	case u.GetNamespace() == "":
		return kind + "/" + name
	}
	return kind + "/" + u.GetNamespace() + "/" + name
}

// NewObject returns u, a settled object from o, as an Object: encoded,
// with what names it and what the plan reads of it. u is not kept.
func NewObject(u *unstructured.Unstructured, o Origin) (Object, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return Object{}, fmt.Errorf("cannot be encoded as JSON: %w", err)
	}
	obj := Object{
		GVK:       u.GroupVersionKind(),
		Namespace: u.GetNamespace(),
		Name:      u.GetName(),
		Wave:      u.GetAnnotations()[v1alpha1.WaveAnnotation],
		Needs:     needs(u),
		JSON:      data,
		Origin:    o,
	}
	if obj.GVK.GroupKind() == crdKind {
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		obj.Defines = schema.GroupKind{Group: group, Kind: kind}
	}
	return obj, nil
}

// Decode returns a new copy of the object, which the caller may change.
func (o Object) Decode() (*unstructured.Unstructured, error) {
	u, err := decodeObject(o.JSON)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): cannot be decoded: %w", o.Ref(), o.Origin, err)
	}
	return u, nil
}

// decodeObject decodes the JSON of an object.
func decodeObject(data []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	// k8s.io's json keeps integers int64, as YAML decodes them.
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// Ref returns the object's kind, namespace and name.
func (o Object) Ref() Ref {
	return Ref{Group: o.GVK.Group, Kind: o.GVK.Kind, Namespace: o.Namespace, Name: o.Name}
}

// String names the object as ID does: Kind/namespace/name, or Kind/name.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}
