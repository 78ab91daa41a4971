package apply_test

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lateDiscovery plays an API server whose discovery lags behind a new
// CRD: for its first lag questions about kind gk once the CRD is
// Established, it answers that there is no such kind. The real API server
// does this for some tens of milliseconds, in about one run in seven of
// the test above, which is too rare to test on demand.
type lateDiscovery struct {
	client.Client
	gk  schema.GroupKind
	crd string

	mu  sync.Mutex
	lag int
}

// lagging reports whether a question about gvk finds no such kind.
func (l *lateDiscovery) lagging(ctx context.Context, gk schema.GroupKind) bool {
	if gk != l.gk {
		return false
	}
	def := &unstructured.Unstructured{}
	def.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := l.Client.Get(ctx, client.ObjectKey{Name: l.crd}, def); err != nil || !established(def) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lag == 0 {
		return false
	}
	l.lag--
	return true
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conds {
		if cm, _ := cond.(map[string]any); cm["type"] == "Established" && cm["status"] == "True" {
			return true
		}
	}
	return false
}

func (l *lateDiscovery) noMatch(gk schema.GroupKind) error {
	return &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: []string{"v1"}}
}

func (l *lateDiscovery) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if gk := obj.GetObjectKind().GroupVersionKind().GroupKind(); l.lagging(ctx, gk) {
		return l.noMatch(gk)
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

func (l *lateDiscovery) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if gk := obj.GetObjectKind().GroupVersionKind().GroupKind(); l.lagging(ctx, gk) {
		return l.noMatch(gk)
	}
	return l.Client.Create(ctx, obj, opts...)
}

func (l *lateDiscovery) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if u, ok := obj.(interface {
		GroupVersionKind() schema.GroupVersionKind
	}); ok && l.lagging(ctx, u.GroupVersionKind().GroupKind()) {
		return l.noMatch(l.gk)
	}
	return l.Client.Apply(ctx, obj, opts...)
}

func (l *lateDiscovery) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if gk := obj.GetObjectKind().GroupVersionKind().GroupKind(); l.lagging(ctx, gk) {
		return l.noMatch(gk)
	}
	return l.Client.Patch(ctx, obj, patch, opts...)
}

func (l *lateDiscovery) RESTMapper() meta.RESTMapper {
	return &lateMapper{RESTMapper: l.Client.RESTMapper(), l: l}
}

type lateMapper struct {
	meta.RESTMapper
	l *lateDiscovery
}

func (m *lateMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if m.l.lagging(context.Background(), gk) {
		return nil, m.l.noMatch(gk)
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func (m *lateMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	if m.l.lagging(context.Background(), gk) {
		return nil, m.l.noMatch(gk)
	}
	return m.RESTMapper.RESTMappings(gk, versions...)
}

func TestACustomResourceOfANewCRDWaitsForDiscovery(t *testing.T) {
	ns := env.Namespace(t)
	crdName := "gadgets." + gadgetGroup(ns)
	cleanupClusterScoped(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", crdName)
	late := &lateDiscovery{Client: c, gk: schema.GroupKind{Group: gadgetGroup(ns), Kind: "Gadget"}, crd: crdName, lag: 3}
	p := planOf(
		fromGit(t, ns, "crds/gadgets.yaml", crd(ns)),
		fromGit(t, ns, "gadgets/first.yaml", `{apiVersion: $NS.example.com/v1, kind: Gadget, metadata: {name: first, namespace: $NS}}`),
	)

	cs, err := newManagerWith(late, ns).Apply(context.Background(), p)

	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	expectActions(t, cs, "CustomResourceDefinition/"+crdName+" Created", "Gadget/"+ns+"/first Created")
	mustGet(t, gadgetGroup(ns)+"/v1", "Gadget", ns, "first")
}
