// Package health decides the health of an object by the CEL expressions of
// a Sync's spec.healthChecks, the same shape and order as Flux's
// Kustomization spec.healthCheckExprs, so that the waits for health
// (waves, spec.wait, and through them dependsOn) can follow custom
// resources whose status kstatus cannot read, such as one with only a
// status.phase.
//
// Compile checks every expression when a Sync is admitted (the admission
// webhook and the controller's spec check call it) and bounds its
// estimated cost; Checks.Evaluate is a pure function of the live object,
// bounded at run time by a cost limit and a timeout. It does not read the
// cluster and does not know kstatus: package apply falls back to kstatus
// for kinds no check names.
package health
