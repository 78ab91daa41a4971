// Package engine is the sync pipeline that the agent and `driftless diff`
// share: resolve and check out a revision, render it, validate it, plan it
// against the Sync's inventory, apply (or dry-run) the plan and prune.
// Given the same inputs both callers get the same plan and the same
// ChangeSet; only what they do with it differs.
//
// It holds no state between calls: caching renders, gating drift checks,
// writing status and events are the controller's. It does not watch.
package engine
