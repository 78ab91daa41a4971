package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/internal/render"
)

// MapperScope answers render's scope questions from the API server's
// discovery, through a RESTMapper that refreshes on unknown kinds.
type MapperScope struct {
	Mapper meta.RESTMapper
}

var _ render.ScopeResolver = MapperScope{}

// Namespaced reports whether the cluster serves gk as a namespaced kind.
func (m MapperScope) Namespaced(gk schema.GroupKind) (bool, error) {
	mapping, err := m.Mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return false, fmt.Errorf("%w: %v", render.ErrUnknownKind, err)
	}
	if err != nil {
		return false, err
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
