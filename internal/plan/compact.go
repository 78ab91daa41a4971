package plan

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Compact returns p with each step's object held as its JSON instead of
// a decoded map (about a fifth of the memory: a map per nested object is
// what a decoded object costs), for a plan held through a long sync:
// Desired decodes a step's object when the apply reaches it. docs, when
// set, holds the JSON of objects the caller already keeps (the render
// cache), which the plan then shares; it must be the JSON of those very
// objects. An object that does not encode (a render never makes one)
// stays decoded. p itself is not changed.
func (p Plan) Compact(docs map[ID][]byte) Plan {
	out := p
	out.Apply = make([]Step, len(p.Apply))
	for i, s := range p.Apply {
		out.Apply[i] = s
		if s.Object.Object == nil {
			continue // already compact
		}
		doc, ok := docs[s.ID]
		if !ok || doc == nil {
			var err error
			if doc, err = json.Marshal(s.Object.Object.Object); err != nil {
				continue
			}
		}
		out.Apply[i].doc = doc
		out.Apply[i].Object.Object = nil
	}
	return out
}

// Desired returns the step's desired object: the one the plan holds, or,
// in a Compact plan, a new copy decoded from its JSON, which the caller
// may change.
func (s Step) Desired() (*unstructured.Unstructured, error) {
	if s.Object.Object != nil {
		return s.Object.Object, nil
	}
	var m map[string]any
	// k8s.io's json keeps integers int64, as a render has them.
	if err := utiljson.Unmarshal(s.doc, &m); err != nil {
		return nil, fmt.Errorf("%s: decode its desired form: %w", s.ID, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// Compacted reports whether the step holds its object as JSON only, so
// that each call of Desired decodes a new copy.
func (s Step) Compacted() bool { return s.Object.Object == nil && s.doc != nil }

// GroupVersionKind is the step's object's kind, at the version it is
// applied with.
func (s Step) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: s.ID.Group, Version: s.Version, Kind: s.ID.Kind}
}
