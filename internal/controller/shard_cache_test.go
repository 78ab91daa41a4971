package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// The agent's cache holds every Sync and Inventory of its shard for as
// long as it runs: without their managedFields, which it never reads
// (38% of a Sync's JSON).
func TestTheCacheKeepsSyncsAndInventoriesWithoutManagedFields(t *testing.T) {
	managed := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "web", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "driftless",
			Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}}}
	}
	for _, shard := range []*Shard{nil, {Name: "a"}} {
		seen := 0
		for key, by := range ShardCacheOptions(shard).ByObject {
			var obj client.Object
			switch key.(type) {
			case *v1alpha1.Sync:
				obj = &v1alpha1.Sync{ObjectMeta: managed()}
			case *v1alpha1.Inventory:
				obj = &v1alpha1.Inventory{ObjectMeta: managed()}
			default:
				continue
			}
			seen++
			if by.Transform == nil {
				t.Errorf("shard %v: %T is cached as the API server sends it, managedFields included", shard, obj)
				continue
			}
			out, err := by.Transform(obj)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(client.Object)
			if len(got.GetManagedFields()) != 0 || got.GetName() != "web" {
				t.Errorf("shard %v: %T cached as %q with managedFields %v, want web with none", shard, obj, got.GetName(), got.GetManagedFields())
			}
		}
		if seen != 2 {
			t.Errorf("shard %v: %d of Sync and Inventory in the cache options, want 2", shard, seen)
		}
	}
}
