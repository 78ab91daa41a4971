// Package apply writes a plan to the cluster with server-side apply and
// prunes what the plan removes. It owns the ChangeSet vocabulary —
// Created, Configured, Unchanged, Pruned, Skipped — that every stage
// returns and every view renders.
//
// It validates before it writes: every object is first applied as a
// server-side dry-run, and nothing is written unless all of them pass.
// It does not fetch or render; it takes a plan.Plan.
package apply
