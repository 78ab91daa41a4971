// Package reliability holds driftless's reliability suite: a corpus of
// bad commits that the agent must refuse without writing an object, and
// faults in the middle of a sync (the agent killed, the API server or
// etcd stopped, a branch force-pushed back) that it must survive with
// nothing lost from prune. Everything runs against the real agent and a
// real local control plane; the package has no code of its own.
//
// The fast subset runs in `make test`; `make reliability` runs it all
// (RELIABILITY_FULL=1). See docs/reliability.md.
package reliability
