// Package drift holds the decisions behind drift correction, as pure
// functions: which watch events are worth a check (Relevant,
// WrittenByOthersSince), the request that names the changed object, who
// changed which field from what to what (Attribute, from managedFields),
// and whether to revert now or back off from a fight (Policy, History).
// The watches and the revert itself are the controller's (internal/
// controller watches.go and drift_controller.go). What it records is
// bounded: long values are cut and hashed, and a Sync's status is kept
// under a fixed budget (bound.go).
//
// It decides; it neither watches, renders nor writes.
package drift
