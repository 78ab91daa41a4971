package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingMapper counts the mappings asked of it, by kind.
type countingMapper struct {
	meta.RESTMapper
	mu    sync.Mutex
	asked map[schema.GroupKind]int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.mu.Lock()
	m.asked[gk]++
	m.mu.Unlock()
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// The apply's writes go through controller-runtime's metadata client,
// which resolves the kind's resource for every request: through the
// apply clients' mapper, each kind is resolved by the agent's mapper
// once, however many objects of it are written.
func TestTheApplyClientResolvesEachKindOnce(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	counting := &countingMapper{RESTMapper: c.RESTMapper(), asked: map[schema.GroupKind]int{}}
	applier, err := client.New(env.Config, client.Options{Scheme: scheme, Mapper: newMappingCache(counting)})
	if err != nil {
		t.Fatal(err)
	}
	const objects = 20
	for i := range objects {
		for _, kind := range []string{"ConfigMap", "ServiceAccount"} {
			obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("o%d", i)}}
			body := fmt.Sprintf(`{"apiVersion":"v1","kind":%q,"metadata":{"name":%q,"namespace":%q}}`, kind, obj.Name, ns)
			if err := applier.Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, []byte(body)), client.FieldOwner("driftless"), client.ForceOwnership); err != nil {
				t.Fatalf("apply %s %s: %v", kind, obj.Name, err)
			}
			if obj.UID == "" {
				t.Fatalf("the answer to the apply of %s %s has no UID", kind, obj.Name)
			}
		}
	}
	for _, gk := range []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "ServiceAccount"}} {
		if got := counting.asked[gk]; got != 1 {
			t.Errorf("%d writes of %s asked the agent's mapper %d times, want once", objects, gk.Kind, got)
		}
	}
}
