// Package controller holds driftless's reconcilers and what they share.
// The Sync reconciler loads a Sync, runs the engine (internal/engine:
// render → validate → plan → apply → prune) and writes what happened to
// the Sync's status and events. The drift reconciler, fed by metadata-only
// watches of managed objects (watches.go), re-applies one changed object.
// Both meet in a Store (store.go) that caches renders and keeps a drift
// check from acting while a sync writes. Decisions live in the engine
// packages, not here.
package controller
