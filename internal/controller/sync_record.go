package controller

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
)

// record is the last stage of a sync: the drift watches of the Sync's
// kinds, its Inventory, and when it was last compared in full. It
// returns the sync's outcome.
func (run *syncRun) record(ctx context.Context) outcome {
	r, s, o, key := run.r, run.s, &run.o, run.key
	if watches := r.watchesOf(s); watches != nil {
		// Watch every kind the Sync may now have objects of: after a
		// failure too, for what it did write. A dry run watches the
		// objects applied before, so that drift is reported at once
		// against its render.
		watched := o.inventory
		if o.dryRun || watched == nil {
			watched = run.previous
		}
		// Cancelled with the agent, not bounded by the sync's timeout
		// (which a failed health wait has used up): Ensure bounds each
		// kind's start itself, and does not wait again for a kind
		// refused before until its back-off has passed. Kinds the Sync
		// no longer holds, and no other Sync does, stop being watched.
		if err := watches.Ensure(ctx, key, kindsOf(watched), o.started); err != nil {
			log.FromContext(ctx).Error(err, "cannot watch managed objects; drift is corrected at the interval")
		}
		o.unwatched = watches.NotWatched(kindsOf(watched))
	}
	if run.tgt.remote != nil && r.Watches != nil {
		// What it held here, when it applied here, is let go.
		r.Watches.Release(key)
	}
	if o.inventory == nil && len(s.Status.Inventory) > 0 {
		// An earlier agent listed the inventory in the status: move it
		// to the Inventory (writeStatus then clears the status's copy).
		o.inventory = run.previous
	}
	res := run.res
	if err := run.saveInventory(ctx); err != nil && res.Err == nil {
		return run.fail(v1alpha1.ReasonApplyFailed, err)
	}
	if res.Err != nil {
		if errors.Is(res.Err, errSuperseded) {
			return run.fail(v1alpha1.ReasonProgressing, res.Err)
		}
		return run.fail(res.Reason, res.Err)
	}
	if o.compared && !o.dryRun {
		// Every object was read, compared and, where it differed, put back.
		r.Store.SetLastFull(key, o.started)
	}
	if run.fromDigests {
		// Every object was compared, or shown unchanged since a
		// verification by its digests: the next full comparison is due
		// a FullResync after the last one recorded.
		r.Store.SetLastFull(key, s.Status.LastComparedAt.Time)
	}
	if o.dryRun {
		// Drift is only reported now: the first sync that writes again
		// compares every object.
		r.Store.SetCompareAll(key)
	}
	if run.tgt.remote != nil {
		run.tgt.remote.failed(false)
	}
	o.lastCompared, _ = r.Store.LastFull(key)
	if o.compared {
		o.lastCompared = o.started // a dry run compared every object too
	}
	o.duration = time.Since(o.started)
	return *o
}

// saveInventory writes the Sync's Inventory, with the digests of what
// the sync verified, before the status that points at it. When it
// cannot, what the Inventory lists (with the write-ahead record, all
// that may have been written) stays until the next sync.
func (run *syncRun) saveInventory(ctx context.Context) error {
	r, s, o := run.r, run.s, &run.o
	if o.inventory == nil {
		return nil
	}
	digests := r.Store.Digests(run.key, s.UID)
	// The entries as the Inventory now lists them: a write-ahead record
	// of this sync may have listed o.inventory already.
	written, _ := r.Store.Inventory(run.key, s.UID)
	if !o.dryRun && (recordsDigests(o.compared, run.storedEntries, o.inventory) || !sameEntries(written, o.inventory)) {
		// What this sync verified is recorded with a comparison of every
		// object, or with entries written anyway; otherwise it waits (a
		// restart compares those objects again), so that a commit, a
		// revert or a small Sync's first sync (whose write-ahead record
		// listed its entries) does not rewrite the Inventory.
		digests = nextDigests(ctx, o.inventory, digests, run.checked.get(), run.byID, r.metadataOf(s))
	}
	if err := r.saveInventory(ctx, s, o.inventory, digests); err != nil {
		o.inventory = nil
		return err
	}
	return nil
}
