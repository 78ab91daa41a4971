package syncview

import (
	"encoding/json"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FieldPaths are the fields of a managedFields entry two levels deep,
// such as "spec.replicas" or "metadata.labels", sorted.
func FieldPaths(f *metav1.FieldsV1) []string {
	if f == nil {
		return []string{}
	}
	var tree map[string]any
	if err := json.Unmarshal(f.GetRawBytes(), &tree); err != nil {
		return []string{}
	}
	var paths []string
	for k, sub := range tree {
		top, ok := fieldName(k)
		if !ok {
			continue
		}
		children, _ := sub.(map[string]any)
		var names []string
		for k2 := range children {
			if n, ok := fieldName(k2); ok {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			paths = append(paths, top)
			continue
		}
		for _, n := range names {
			if strings.HasPrefix(n, "[") {
				paths = append(paths, top+n)
			} else {
				paths = append(paths, top+"."+n)
			}
		}
	}
	sort.Strings(paths)
	return compactPaths(paths)
}

// fieldName reads a key of a FieldsV1 set: "f:name" is name, list items
// ("k:{…}", "v:…", "i:N") are "[…]"; "." (the node itself) is not a field.
func fieldName(k string) (string, bool) {
	switch {
	case strings.HasPrefix(k, "f:"):
		return k[2:], true
	case strings.HasPrefix(k, "k:"), strings.HasPrefix(k, "v:"), strings.HasPrefix(k, "i:"):
		return "[…]", true
	}
	return "", false
}

func compactPaths(paths []string) []string {
	out := paths[:0]
	for i, p := range paths {
		if i > 0 && p == paths[i-1] {
			continue
		}
		out = append(out, p)
	}
	return out
}
