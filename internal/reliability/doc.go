// Package reliability holds driftless's reliability suite: a corpus of
// bad commits that the agent must refuse without writing an object, and
// faults in the middle of a sync (the agent killed, the API server or
// etcd stopped, the git server down, a branch force-pushed back, the
// leader of two agents killed) that it must survive with nothing lost
// from prune; and a soak (SOAK=<duration>, make soak). Everything runs against the real agent and a
// real local control plane; the package has no code of its own.
//
// The fast subset runs in `make test`; `make reliability` runs it all
// (RELIABILITY_FULL=1, RELIABILITY_GIT_OUTAGE=5m). See docs/reliability.md.
package reliability
