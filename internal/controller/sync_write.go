package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/plan"
)

// write is the second stage of a sync: engine.Run of the render, with the
// Sync's gate held from the first request to the last (validation
// included, so that the objects compared are the objects written),
// except while waiting for health. It reports done when the sync ended
// before anything was asked of the cluster.
func (run *syncRun) write(ctx context.Context) (done bool) {
	r, s, o := run.r, run.s, &run.o
	w := r.Store.BeginWrite(run.key, s.UID)
	defer w.Release()
	w.SetSecrets(run.secrets)
	// The render by ID, as the Store holds it (desiredObjects cached it):
	// each object's JSON, which the plan, the drift record and the
	// digests share.
	run.byID = w.Rendered()
	h := &writeHooks{ctx: ctx, run: run, w: w, total: len(run.objects), ahead: kindsAhead(run.objects, run.previous)}
	in := engine.Input{Sync: s, Objects: run.objects, Inventory: run.previous, DryRun: o.dryRun, Concurrency: r.applyConcurrency()}
	run.objects = nil
	same := sameAsApplied(w, run.byID)
	run.storedEntries, _ = r.Store.Inventory(run.key, s.UID)
	if !o.dryRun {
		in.Known, run.fromDigests = r.known(ctx, s, same, run.marked, run.byID, o.started)
		// An object whose render is what was applied and that differs
		// in the cluster is a drift this sync puts back: keep what it
		// was, to say so.
		in.Keep = same
		in.Written, in.Found, in.BeforeWrite, in.Record = h.written, run.checked.found, h.beforeWrite, h.record
	}
	o.compared = in.Known == nil
	in.Wait = apply.WaitOptions{Last: s.Spec.Wait, Progress: h.progress, Around: h.around}
	if err := run.finalizer.failed(); err != nil {
		run.fail(v1alpha1.ReasonApplyFailed, err) // not worth validating: nothing may be written
		return true
	}
	res := engine.Run(ctx, run.tgt.id.client, in)
	if h.watching != nil {
		<-h.watching // the Ensure of record says what did not start
	}
	res.Reason, res.Err = run.tgt.unreachable(res.Reason, res.Err)
	run.res = res
	o.changes, o.inventory = res.Changes, res.Inventory
	if !o.dryRun {
		o.reverted = revertedDrift(res.Changes, run.byID, run.secrets)
	}
	r.Store.Checked(run.key, comparedMarks(run.marked, res.Changes, o.dryRun)...)
	switch {
	case res.Err == nil:
		// A dry run's render is what drift is reported against.
		w.Replace(run.byID)
	case !o.dryRun:
		w.Record(res.Changes, run.byID)
		w.Forget(uncertain(res)...)
	}
	if !o.dryRun {
		r.settleEchoes(ctx, s, run.key, w)
	}
	return false
}

// writeHooks are what a sync does while engine.Run writes: they record
// each write, start the drift watches of the kinds it may write, keep
// the Inventory ahead of the writes, report progress, and record each
// wave before waiting for its health.
type writeHooks struct {
	// ctx is the sync's, which progress is written under.
	ctx context.Context
	run *syncRun
	w   *Writer
	// total is how many objects the render holds; ahead the kinds it
	// may write that the inventory does not hold yet.
	total int
	ahead []schema.GroupVersionKind
	// watching is closed once the watches started ahead have listed.
	watching <-chan struct{}
}

func (h *writeHooks) written(obj *metav1.PartialObjectMetadata) {
	h.run.r.Store.Writes().Wrote(obj.UID, obj.ResourceVersion)
	h.run.checked.wrote(obj)
}

func (h *writeHooks) beforeWrite(ctx context.Context) error {
	run := h.run
	if err := run.finalizer.wait(ctx, run.s); err != nil {
		return err
	}
	// The drift watches of the kinds this sync may write start while it
	// writes, not after: a new kind's first list is off the first sync's
	// path. A watch that lists before an object is written sees the
	// write as its event, which the drift check recognises as the
	// agent's own (Writes, the gate) as it does every write of a watched
	// kind.
	h.watching = watchAhead(ctx, run.r.watchesOf(run.s), run.key, h.ahead, run.o.started)
	return nil
}

func (h *writeHooks) record(ctx context.Context, entries []plan.Entry) error {
	return h.run.r.recordInventory(ctx, h.run.s, entries)
}

func (h *writeHooks) progress(p apply.WaveProgress) {
	run := h.run
	run.o.progressed = true
	run.r.writeProgress(h.ctx, run.s, progressOf(run.o.revision, p, h.total), len(p.Wave.Steps))
}

// around records what a wave wrote — what drift reverts to from now on —
// and lets drift checks run while the sync waits for its health.
func (h *writeHooks) around(ctx context.Context, wave apply.Wave, wait func(context.Context) error) error {
	run := h.run
	h.w.Record(wave.Changes, run.byID)
	return h.w.Pause(func() error {
		if run.o.hold != nil {
			return wait(ctx) // a new commit does not supersede a hold
		}
		return untilSuperseded(ctx, run.r.Mirror(), run.prepared.Request, run.o.revision, wait)
	})
}
