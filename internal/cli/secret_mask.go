package cli

import (
	"reflect"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
)

// decryptedIDs returns the objects of the lists that hold values
// decrypted from git.
func decryptedIDs(lists ...[]render.Object) map[plan.ID]bool {
	ids := map[plan.ID]bool{}
	for _, list := range lists {
		for _, o := range list {
			if o.Decrypted {
				ids[plan.ObjectID(o)] = true
			}
		}
	}
	return ids
}

// maskDecrypted replaces, in place, every value of before and after, the
// two sides of an object that holds values decrypted from git, except its
// apiVersion, kind, the fields of its metadata and the driftless label and
// annotation (other labels and annotations are masked). Values of before
// become "***"; values of after become "***" when before holds the same
// value at the same place, else "*** (changed)", so that a diff shows
// which values change without showing any. Either side may be nil.
func maskDecrypted(before, after map[string]any) {
	for k, v := range after {
		var old any
		if before != nil {
			old = before[k]
		}
		switch k {
		case "apiVersion", "kind":
		case "metadata":
			maskMetadata(v, old, true)
		default:
			after[k] = maskAgainst(v, old, before != nil)
		}
	}
	for k, v := range before {
		switch k {
		case "apiVersion", "kind":
		case "metadata":
			maskMetadata(v, nil, false)
		default:
			before[k] = maskAgainst(v, nil, false)
		}
	}
}

// maskMetadata masks the labels and annotations of md but driftless's
// own, against old when compare is set.
func maskMetadata(md, old any, compare bool) {
	m, _ := md.(map[string]any)
	o, _ := old.(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		entries, _ := m[field].(map[string]any)
		olds, _ := o[field].(map[string]any)
		for k, v := range entries {
			if k == v1alpha1.SyncLabel || k == v1alpha1.SyncShardLabel || k == v1alpha1.OriginAnnotation {
				continue
			}
			entries[k] = maskAgainst(v, olds[k], compare)
		}
	}
}

// maskAgainst returns v with every leaf replaced: by "***", or, when
// compare is set, by "*** (changed)" where old differs at that place.
func maskAgainst(v, old any, compare bool) any {
	switch v := v.(type) {
	case map[string]any:
		o, _ := old.(map[string]any)
		for k, item := range v {
			v[k] = maskAgainst(item, o[k], compare)
		}
		return v
	case []any:
		o, _ := old.([]any)
		for i, item := range v {
			var prev any
			if i < len(o) {
				prev = o[i]
			}
			v[i] = maskAgainst(item, prev, compare)
		}
		return v
	}
	if compare && !reflect.DeepEqual(v, old) {
		return maskedChangedValue
	}
	return maskedValue
}
