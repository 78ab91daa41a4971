package apply

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/driftless/driftless/api/v1alpha1"
)

// withoutIgnoredFields returns a copy of u without the fields named by its
// driftless.dev/ignore-fields annotation (comma-separated JSON pointers,
// RFC 6901), so that driftless neither writes nor compares them. A
// pointer that names no field of u is fine: git does not set it.
func withoutIgnoredFields(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	spec := u.GetAnnotations()[v1alpha1.IgnoreFieldsAnnotation]
	if strings.TrimSpace(spec) == "" {
		return u, nil
	}
	c := u.DeepCopy()
	for _, ptr := range strings.Split(spec, ",") {
		path, err := ParsePointer(strings.TrimSpace(ptr))
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", v1alpha1.IgnoreFieldsAnnotation, err)
		}
		removePath(c.Object, path)
	}
	return c, nil
}

// ParsePointer splits a JSON pointer such as /spec/replicas into its
// unescaped segments.
func ParsePointer(ptr string) ([]string, error) {
	if !strings.HasPrefix(ptr, "/") || ptr == "/" {
		return nil, fmt.Errorf("%q is not a JSON pointer to a field: write it like /spec/replicas", ptr)
	}
	parts := strings.Split(ptr[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func removePath(obj any, path []string) {
	if len(path) == 0 {
		return
	}
	switch o := obj.(type) {
	case map[string]any:
		if len(path) == 1 {
			delete(o, path[0])
			return
		}
		removePath(o[path[0]], path[1:])
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(o) {
			return
		}
		if len(path) == 1 {
			// Removing a whole list item would shift the others; ignore
			// pointers to items, only fields within them.
			return
		}
		removePath(o[i], path[1:])
	}
}

// adoptIgnored sets, in desired, each ignored field to the value live has,
// so that applying desired leaves it as it is. Merely leaving the field
// out is not enough: server-side apply removes a field that driftless
// applied before and no longer sends.
func adoptIgnored(desired, live *unstructured.Unstructured) *unstructured.Unstructured {
	spec := desired.GetAnnotations()[v1alpha1.IgnoreFieldsAnnotation]
	if strings.TrimSpace(spec) == "" {
		return desired
	}
	out := desired
	for _, ptr := range strings.Split(spec, ",") {
		path, err := ParsePointer(strings.TrimSpace(ptr))
		if err != nil || len(path) == 0 {
			continue
		}
		v, ok := lookup(live.Object, path)
		if !ok {
			continue
		}
		if out == desired {
			out = desired.DeepCopy()
		}
		setPath(out.Object, path, v)
	}
	return out
}

func lookup(obj any, path []string) (any, bool) {
	cur := obj
	for _, p := range path {
		switch o := cur.(type) {
		case map[string]any:
			v, ok := o[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(o) {
				return nil, false
			}
			cur = o[i]
		default:
			return nil, false
		}
	}
	return runtimeDeepCopy(cur), true
}

// setPath sets a map path (creating maps as needed); list segments must
// already exist in obj.
func setPath(obj map[string]any, path []string, v any) {
	var cur any = obj
	for i, p := range path {
		last := i == len(path)-1
		switch o := cur.(type) {
		case map[string]any:
			if last {
				o[p] = v
				return
			}
			next, ok := o[p]
			if !ok {
				next = map[string]any{}
				o[p] = next
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(p)
			if err != nil || idx < 0 || idx >= len(o) {
				return
			}
			if last {
				o[idx] = v
				return
			}
			cur = o[idx]
		default:
			return
		}
	}
}

func runtimeDeepCopy(v any) any {
	return runtime.DeepCopyJSONValue(v)
}
