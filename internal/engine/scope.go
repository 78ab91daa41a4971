package engine

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

// BuiltinScope tells render, without a cluster, which kinds are
// namespaced: every kind but the cluster-scoped built-in ones below.
// Render itself takes the scope of kinds defined by a
// CustomResourceDefinition in the same render from it.
type BuiltinScope struct{}

var _ render.ScopeResolver = BuiltinScope{}

// clusterScoped are the cluster-scoped kinds of Kubernetes and its
// aggregation layer.
var clusterScoped = map[schema.GroupKind]bool{
	{Group: "", Kind: "Namespace"}:                                                    true,
	{Group: "", Kind: "Node"}:                                                         true,
	{Group: "", Kind: "PersistentVolume"}:                                             true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
}

// Namespaced reports whether gk is namespaced; it never fails.
func (BuiltinScope) Namespaced(gk schema.GroupKind) (bool, error) {
	return !clusterScoped[gk], nil
}
