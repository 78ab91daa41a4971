// Package drift notices when someone changes an object a Sync manages and
// puts it back. It watches only managed objects (by the driftless.dev/sync
// label, metadata only), checks the one object that changed with a
// server-side dry-run, reverts it, and says which field changed, from
// what, to what, and which field manager did it.
//
// It decides, it does not render: the desired objects come from the last
// sync. A full comparison at the Sync's interval remains the safety net.
package drift
