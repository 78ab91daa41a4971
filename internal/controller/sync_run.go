package controller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/redact"
	"github.com/driftless/driftless/internal/render"
)

// sync runs the pipeline — dependencies → fetch → render → engine.Run
// (validate → plan → apply → prune) — and records what it wrote in the
// Store, holding the Sync's gate while it writes so that drift checks
// never act on an older render. Each step that fails sets its reason and
// stops; nothing is pruned unless fetch, render and apply succeeded.
// Its stages are prepare (sync_prepare.go), write (sync_write.go) and
// record (sync_record.go).
func (r *SyncReconciler) sync(ctx context.Context, s *v1alpha1.Sync, id identity, finalizer *finalizerPatch) outcome {
	run := &syncRun{r: r, s: s, key: client.ObjectKeyFromObject(s), finalizer: finalizer, o: outcome{started: time.Now()}}
	if done := run.prepare(ctx, id); done {
		return run.o
	}
	if done := run.write(ctx); done {
		return run.o
	}
	return run.record(ctx)
}

// syncRun is one sync of a Sync, carried through its stages.
type syncRun struct {
	r         *SyncReconciler
	s         *v1alpha1.Sync
	key       client.ObjectKey
	finalizer *finalizerPatch
	o         outcome
	tgt       target
	// prepared is the front half of the pipeline (engine.Prepare): its
	// Secrets remember every Secret the render read, so that an error
	// quoting one of its values (a chart's fail with a valuesFrom value)
	// is masked too.
	prepared *engine.Prepared
	// secrets are the Secret-derived values known so far (the Sync's
	// variables, then its render's): every error is masked with them,
	// since the API server echoes invalid values.
	secrets *redact.Set

	// Set by prepare: the render, the inventory before the sync, and the
	// objects a drift check saw changed and could not act on.
	objects  []render.Object
	previous []plan.Entry
	marked   map[plan.ID]bool

	// Set by write: what engine.Run did, the render by ID as the Store
	// holds it, what the sync verified, the Inventory's entries before
	// it, and whether unchanged objects were known from their digests.
	res           engine.Result
	byID          map[plan.ID]render.Object
	checked       verified
	storedEntries []plan.Entry
	fromDigests   bool
}

// fail ends the sync with reason and err, masked.
func (run *syncRun) fail(reason string, err error) outcome {
	o := &run.o
	if deniedRead(err) {
		// The Sync's ServiceAccount may not read what it names.
		reason = v1alpha1.ReasonAccessDenied
	}
	if run.tgt.remote != nil {
		o.retry = run.tgt.remote.failed(reason == v1alpha1.ReasonClusterUnreachable)
	}
	o.reason, o.err = reason, run.secrets.Error(err)
	if run.prepared != nil {
		o.err = redact.New(run.prepared.Secrets.Values()...).Error(o.err)
	}
	o.duration = time.Since(o.started)
	return *o
}
