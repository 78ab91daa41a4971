package controller

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/drift"
)

// Shard is the set of Syncs one agent serves (agent --shard,
// docs/sharding.md). A nil *Shard serves every Sync, whatever its label.
type Shard struct {
	// Name is the value of the Syncs' driftless.dev/shard label; ""
	// serves the Syncs without that label.
	Name string
}

// CheckShardName reports whether name can name a shard: a label value
// that also fits in the name of the shard's Lease.
func CheckShardName(name string) error {
	if name == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("shard name %q: %s; use lowercase letters, digits and '-', such as shard-1", name, errs[0])
	}
	return nil
}

// LeaseName is the leader-election Lease of the agents of s:
// driftless-agent for every Sync (nil), driftless-agent-shard-NAME for a
// named shard, driftless-agent-unlabelled for the Syncs without a shard
// label. Replicas of one shard elect one leader; each shard has its own.
func (s *Shard) LeaseName() string {
	switch {
	case s == nil:
		return "driftless-agent"
	case s.Name == "":
		return "driftless-agent-unlabelled"
	}
	return "driftless-agent-shard-" + s.Name
}

// String names s in logs: "all", "(unlabelled)" or the shard's name.
func (s *Shard) String() string {
	switch {
	case s == nil:
		return "all"
	case s.Name == "":
		return "(unlabelled)"
	}
	return s.Name
}

// selector selects the objects whose label key names s: every object
// for nil; key=NAME; or, for "", the objects without key.
func (s *Shard) selector(key string) labels.Selector {
	if s == nil {
		return labels.Everything()
	}
	op, values := selection.Equals, []string{s.Name}
	if s.Name == "" {
		op, values = selection.DoesNotExist, nil
	}
	r, err := labels.NewRequirement(key, op, values)
	if err != nil {
		panic(err) // CheckShardName ran; a constant key is valid
	}
	return labels.NewSelector().Add(*r)
}

// SyncSelector selects the Syncs (and ImagePolicies) s serves, by their
// driftless.dev/shard label.
func (s *Shard) SyncSelector() labels.Selector { return s.selector(v1alpha1.ShardLabel) }

// Serves reports whether s serves an object with these labels (a Sync).
func (s *Shard) Serves(objLabels map[string]string) bool {
	return s.SyncSelector().Matches(labels.Set(objLabels))
}

// ShardCacheOptions is CacheOptions for the agents of shard s: the Syncs
// of s; their Inventories and the metadata of the objects they manage,
// by the driftless.dev/sync-shard label the agent writes on them. Memory
// follows the shard, not the cluster. nil: every Sync (CacheOptions).
func ShardCacheOptions(s *Shard) cache.Options {
	managed, err := labels.NewRequirement(v1alpha1.SyncLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key is always valid
	}
	objects := labels.NewSelector().Add(*managed)
	if reqs, _ := s.selector(v1alpha1.SyncShardLabel).Requirements(); len(reqs) > 0 {
		objects = objects.Add(reqs...)
	}
	return cache.Options{
		DefaultLabelSelector: objects,
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.Sync{}:      {Label: s.SyncSelector(), Transform: dropManagedFields},
			&v1alpha1.Inventory{}: {Label: s.selector(v1alpha1.SyncShardLabel), Transform: dropManagedFields},
		},
		// The drift watches keep digests of managedFields, not the
		// field sets.
		DefaultTransform: drift.CompactMetadata,
	}
}

// dropManagedFields is the cache transform of Syncs and Inventories: the
// agent never reads their managedFields, which are 38% of a Sync's JSON
// (each status condition and field named) and list every entry of an
// Inventory again. Writes of a cached copy are patches (and an update
// that leaves managedFields unset keeps the server's).
func dropManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}
