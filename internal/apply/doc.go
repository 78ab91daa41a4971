// Package apply writes a plan to the cluster with server-side apply and
// prunes what the plan removes. It owns the ChangeSet vocabulary —
// Created, Configured, Unchanged, Pruned, Skipped — that every stage
// returns and every view renders.
//
// It validates before it writes: every object is first applied as a
// server-side dry-run, and nothing is written unless all of them pass —
// except the new Namespaces and CRDs that objects of the plan need before
// the server can validate them. It writes wave by wave and waits for each
// wave to be healthy (kstatus) before the next. It refuses to take an
// object that another Sync owns, and adopts one that no Sync owns.
// It does not fetch, render or decide what to prune; it takes a plan.Plan.
package apply
