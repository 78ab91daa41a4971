// Package plan turns the desired objects of a sync and the inventory of the
// previous sync into an ordered set of changes: what to apply, in which
// order, and what to prune. It is pure: no cluster, no clock, no I/O, so a
// plan can be printed, diffed and tested on its own.
//
// It does not decide whether an object differs from the cluster; the apply
// package finds that out with a server-side dry-run.
package plan
