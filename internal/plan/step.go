package plan

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Desired returns a new copy of the step's desired object, decoded from
// the render's JSON, which the caller may change. A plan holds each
// object as JSON only (about a fifth of the memory of a decoded map), so
// that a plan held through a long sync holds at most the objects in
// flight decoded.
func (s Step) Desired() (*unstructured.Unstructured, error) {
	return s.Object.Decode()
}

// GroupVersionKind is the step's object's kind, at the version it is
// applied with.
func (s Step) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: s.ID.Group, Version: s.Version, Kind: s.ID.Kind}
}
