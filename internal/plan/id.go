package plan

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/internal/render"
)

// ID identifies an object in a cluster independently of its API version.
type ID struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// IDOf returns the ID of u.
func IDOf(u *unstructured.Unstructured) ID {
	gvk := u.GroupVersionKind()
	return ID{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// ObjectID returns the ID of o.
func ObjectID(o render.Object) ID { return ID(o.Ref()) }

// GroupKind returns the ID's group and kind.
func (id ID) GroupKind() schema.GroupKind { return schema.GroupKind{Group: id.Group, Kind: id.Kind} }

// String is the form people read in events and logs: Kind/namespace/name,
// or Kind/name for cluster-scoped objects.
func (id ID) String() string {
	if id.Namespace == "" {
		return id.Kind + "/" + id.Name
	}
	return id.Kind + "/" + id.Namespace + "/" + id.Name
}
