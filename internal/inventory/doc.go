// Package inventory owns the record of what a Sync applied: the ID
// encoding stored in status.inventory, the conversion between that status
// shape and plan entries, and the set arithmetic a sync does on it (union
// after a partial apply, keeping entries whose prune failed).
//
// It is the only reader and writer of the encoding; everything else uses
// plan.Entry. It does not talk to a cluster.
package inventory
