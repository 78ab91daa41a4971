package v1alpha1

// Shards (docs/sharding.md): agents started with --shard NAME serve only
// the Syncs labelled ShardLabel: NAME; --shard "" serves those without it.
const (
	// ShardLabel on a Sync (or an ImagePolicy) names the shard, the agent
	// replicas started with --shard of that name, that serves it. Users
	// set it; a Sync without it belongs to the shard "".
	ShardLabel = "driftless.dev/shard"
	// SyncShardLabel on an object a Sync applies, and on the Sync's
	// Inventory, repeats the Sync's ShardLabel (absent when the Sync has
	// none), so that each shard's drift watches cache only the objects of
	// its own Syncs. The agent writes it; it is not ShardLabel, which a
	// Sync applied from git by another Sync carries for itself.
	SyncShardLabel = "driftless.dev/sync-shard"
)

// ShardOf returns the shard that serves obj: its ShardLabel, "" without.
func ShardOf(labels map[string]string) string { return labels[ShardLabel] }
