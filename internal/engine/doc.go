// Package engine is the sync pipeline that the agent (internal/controller),
// `driftless diff` and `driftless build` share, so that given the same
// inputs they get the same render, the same plan and the same ChangeSet;
// only what they do with it differs.
//
// Its front half turns a Sync into a render: SourceRequest builds the fetch
// request (the git Secret, the trusted keys of spec.source.git.verify, or
// the OCI source); Variables, DecryptionKeys and ReadKubeConfig read what
// the Sync names (spec.substituteFrom, spec.decryption, spec.kubeConfig);
// Render, RenderTree and RenderDir render a checkout with the agent's
// RenderOptions (charts from repositories, remote Kustomize bases, lookups,
// valuesFrom, SOPS decryption, budgets) and say the Ready reason of a
// failure; MapperScope (the cluster's discovery) or BuiltinScope (no
// cluster) tells it which kinds are namespaced, and Capabilities what
// charts see of the cluster. Everything a Sync names is read through a
// Reader whose identity the caller chooses: the agent reads a tenant's Sync
// as its ServiceAccount. Redactor collects the Secret-derived values that
// every message about the render is masked with.
//
// Its back half, Run, validates the render with a server-side dry run,
// plans it against the Sync's inventory (internal/plan), applies it wave by
// wave, waits for health and prunes (internal/apply), keeping the inventory
// complete after a partial failure.
//
// It is not a reconciler and holds no state between calls: resolving and
// caching revisions (source.Mirror), caching renders, gating drift checks,
// retries, and writing status and events are the controller's. It does not
// watch, and it does not know which cluster it writes to: the caller hands
// Run its client.
package engine
