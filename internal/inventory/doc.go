// Package inventory owns the record of what a Sync applied: the ID
// encoding, the Inventory object (same namespace and name as its Sync,
// controlled by it) that lists the entries, the legacy status.inventory
// that agents before the Inventory kind wrote, the conversion between
// those shapes and plan entries, and the set arithmetic a sync does on
// them (union after a partial apply, keeping entries whose prune failed).
//
// It is the only reader and writer of the encoding; everything else uses
// plan.Entry. Read is its only call to a cluster, shared by the agent and
// the CLI; writing the Inventory is the agent's (internal/controller).
package inventory
