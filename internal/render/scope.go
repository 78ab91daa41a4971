package render

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ScopeResolver tells whether a kind is namespaced, from the API server's
// discovery. It returns an error wrapping ErrUnknownKind when the cluster
// does not serve the kind.
type ScopeResolver interface {
	Namespaced(gk schema.GroupKind) (bool, error)
}

var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// scopes tells whether kinds are namespaced: from the
// CustomResourceDefinitions in the render first, then from the cluster,
// which it asks once per kind.
type scopes struct {
	defined map[schema.GroupKind]bool
	cluster ScopeResolver
	asked   map[schema.GroupKind]answer
}

type answer struct {
	namespaced bool
	err        error
}

// kindScopes reads the scope of every kind a CustomResourceDefinition in
// the render defines.
func (r *renderer) kindScopes() *scopes {
	s := &scopes{
		defined: map[schema.GroupKind]bool{},
		cluster: r.opts.Scope,
		asked:   map[schema.GroupKind]answer{},
	}
	for _, p := range r.pending {
		if !p.crd {
			continue
		}
		crd, err := p.decode()
		if err != nil {
			continue // settle reports it
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		gk := schema.GroupKind{Group: group, Kind: kind}
		switch scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope"); scope {
		case "Namespaced":
			s.defined[gk] = true
		case "Cluster":
			s.defined[gk] = false
		default:
			r.fail(p.origin, p.ref, fmt.Errorf("spec.scope is %q; set it to Namespaced or Cluster", scope))
		}
	}
	return s
}

func (s *scopes) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	gk := gvk.GroupKind()
	if namespaced, ok := s.defined[gk]; ok {
		return namespaced, nil
	}
	a, ok := s.asked[gk]
	if !ok {
		a.namespaced, a.err = s.cluster.Namespaced(gk)
		s.asked[gk] = a
	}
	switch {
	case errors.Is(a.err, ErrUnknownKind):
		return false, fmt.Errorf("%w: the cluster serves no %s in %s and no CustomResourceDefinition in this sync defines it",
			ErrUnknownKind, gvk.Kind, gvk.GroupVersion())
	case a.err != nil:
		return false, fmt.Errorf("cannot tell whether %s in %s is namespaced: %w", gvk.Kind, gvk.GroupVersion(), a.err)
	}
	return a.namespaced, nil
}
