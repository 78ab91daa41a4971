package plan

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/internal/render"
)

// references returns the IDs of the objects o needs to exist before it:
// those the render found it refers to (render.Object.Needs: its
// Namespace, what a workload's pod template mounts or runs as, the
// Service behind an APIService or admission webhook) and the CRD of a
// custom resource (crdOf maps group/kind to the CRD's ID in the same
// render).
func references(o render.Object, crdOf map[schema.GroupKind]ID) []ID {
	refs := make([]ID, 0, len(o.Needs)+1)
	for _, r := range o.Needs {
		refs = append(refs, ID(r))
	}
	if crd, ok := crdOf[o.GVK.GroupKind()]; ok {
		refs = append(refs, crd)
	}
	return refs
}

// crdIndex maps the group/kind each CRD of the render defines to its ID.
func crdIndex(desired []render.Object) map[schema.GroupKind]ID {
	idx := map[schema.GroupKind]ID{}
	for _, o := range desired {
		if !o.Defines.Empty() {
			idx[o.Defines] = ObjectID(o)
		}
	}
	return idx
}
