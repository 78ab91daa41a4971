package v1alpha1

// The ConfigMaps, in the agent's namespace, in which the agent keeps its
// state; config/rbac grants the agent them by name, and `driftless
// uninstall` removes them.
const (
	// NotifyStateConfigMap keeps what the notifications sent, so that a
	// restart does not send an open failure again
	// (docs/notifications.md).
	NotifyStateConfigMap = "driftless-notify-state"
	// RelayConfigMap is the ConfigMap through which the webhook receiver
	// of a sharded agent passes each push notice to the agents of the
	// other shards: a git host calls one address, which reaches one
	// shard's agent, while the Syncs the push concerns may be any shard's
	// (docs/webhooks.md).
	RelayConfigMap = "driftless-push-notices"
)
