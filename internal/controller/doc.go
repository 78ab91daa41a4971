// Package controller holds the agent's Sync and drift reconcilers and what
// they share; Setup wires them into a manager (internal/agent calls it).
//
// The Sync reconciler (sync_controller.go and the sync_*.go files by stage)
// loads a Sync, checks its spec, its dependsOn and its hold, resolves its
// revision through the source mirror (git or OCI), runs the engine
// (internal/engine: render → validate → plan → apply → prune, wave by
// wave), records the Inventory (a write-ahead one before the first write),
// prunes on delete (the finalizer), and writes what happened to the Sync's
// status, history, events, metrics and commit statuses (RevisionReporter).
// It wakes Syncs on a sync-now request, a push notice (WakeUp) or a
// dependency's change.
//
// The drift reconciler (drift_controller.go), fed by the metadata-only
// watches of managed objects (watches.go), compares one changed object with
// its desired form, attributes the change and puts it back as git has it
// (or only reports it), recording the incident in the Sync's status. Both
// reconcilers meet in a Store (store.go), keyed by the Sync's
// client.ObjectKey: the last render, what the agent's own writes returned,
// and the gate that keeps a drift check from acting while a sync writes.
//
// Who a Sync acts as, and on which cluster, is answered here once:
// Identities and Tenancy (identity.go) impersonate a tenant Sync's
// ServiceAccount; Clusters (cluster.go) holds the clients and watches of
// the remote clusters of spec.kubeConfig; Shard (shard.go) narrows the
// caches to one shard's Syncs.
//
// It is not the pipeline nor its decisions: rendering, planning, applying
// and drift decisions (attribution, back-off, bounds) live in the engine,
// render, plan, apply and drift packages, and the reconcilers stay thin.
// ImagePolicies and image updates have their own reconcilers
// (internal/controller/image).
package controller
