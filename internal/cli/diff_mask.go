package cli

import (
	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/driftless/driftless/internal/plan"
)

// Placeholders of masked Secret values.
const (
	maskedValue        = "***"
	maskedChangedValue = "*** (changed)"
)

// lastAppliedAnnotation is kubectl's annotation holding a copy of the
// object as last applied with kubectl, Secret values included.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// maskSecrets replaces, in place, every value under data and stringData
// of before and after, the two sides of the object id, when it is a
// Secret; other kinds are left alone. Values of before become "***";
// values of after become "***" when before holds the same value under the
// same key, else "*** (changed)", so that a diff shows which values
// change without showing any. Values are compared decoded: a value in
// stringData equals the same value base64-encoded in data. kubectl's
// last-applied-configuration annotation, a copy of the values, is
// masked likewise.
func maskSecrets(id plan.ID, before, after map[string]any) {
	if id.Group != "" || id.Kind != "Secret" {
		return
	}
	old := secretValues(before)
	maskValues(before, func(string, []byte) string { return maskedValue })
	maskValues(after, func(key string, value []byte) string {
		if v, ok := old[key]; before == nil || (ok && bytes.Equal(v, value)) {
			return maskedValue
		}
		return maskedChangedValue
	})
}

// secretValues returns the decoded values of a Secret by key, stringData
// winning over data as the API server merges them.
func secretValues(obj map[string]any) map[string][]byte {
	values := map[string][]byte{}
	for _, field := range []string{"data", "stringData"} {
		switch m := obj[field].(type) {
		case nil:
		case map[string]any:
			for k, v := range m {
				values[k] = []byte(fmt.Sprint(v))
				if field == "data" {
					if b, err := base64.StdEncoding.DecodeString(fmt.Sprint(v)); err == nil {
						values[k] = b
					}
				}
			}
		default:
			values["\x00"+field] = []byte(fmt.Sprint(m))
		}
	}
	if ann, ok := annotationsOf(obj); ok {
		if v, ok := ann[lastAppliedAnnotation]; ok {
			values["\x00"+lastAppliedAnnotation] = []byte(fmt.Sprint(v))
		}
	}
	return values
}

// maskValues replaces every value under data and stringData of a Secret
// (and its last-applied-configuration annotation) with placeholder(key,
// decoded value). A data or stringData that is not a map (an invalid
// Secret) is replaced whole.
func maskValues(obj map[string]any, placeholder func(key string, value []byte) string) {
	if obj == nil {
		return
	}
	values := secretValues(obj)
	for _, field := range []string{"data", "stringData"} {
		v, ok := obj[field]
		if !ok || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			obj[field] = placeholder("\x00"+field, values["\x00"+field])
			continue
		}
		for k := range m {
			m[k] = placeholder(k, values[k])
		}
	}
	if ann, ok := annotationsOf(obj); ok {
		if _, ok := ann[lastAppliedAnnotation]; ok {
			key := "\x00" + lastAppliedAnnotation
			ann[lastAppliedAnnotation] = placeholder(key, values[key])
		}
	}
}

func annotationsOf(obj map[string]any) (map[string]any, bool) {
	md, _ := obj["metadata"].(map[string]any)
	ann, ok := md["annotations"].(map[string]any)
	return ann, ok
}
