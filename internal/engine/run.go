package engine

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/health"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
)

// Input is one sync to run: a Sync's render, its inventory, and how.
type Input struct {
	// Sync is the Sync being synced; its spec decides prune, allowEmpty
	// and the owner label.
	Sync *v1alpha1.Sync
	// Objects is the render of the revision, each object as its JSON:
	// the plan holds them as they are, and the apply decodes each when
	// it reaches it.
	Objects []render.Object
	// Inventory is what the previous sync left (the Sync's Inventory).
	Inventory []plan.Entry
	// DryRun validates and compares everything but writes nothing.
	DryRun bool
	// Concurrency bounds the requests in flight within the sync (dry
	// runs, writes, reads, deletes); 0 means apply.DefaultConcurrency.
	Concurrency int
	// Known, when set, names the steps known to be equal to the cluster
	// without asking it (the controller knows from its watches): they are
	// reported Unchanged and cost no request.
	Known func(plan.Step) bool
	// Keep and Written are passed to the apply (apply.Options): the
	// objects whose Configured change keeps the object before and after,
	// and who is told of each write.
	Keep    func(plan.ID) bool
	Written func(obj *metav1.PartialObjectMetadata)
	// Found is passed to the apply (apply.Options): who is told of each
	// object found equal to its desired form.
	Found func(obj *unstructured.Unstructured)
	// Wait says when to wait for waves to be healthy, and how to report
	// it (see apply.WaitOptions).
	Wait apply.WaitOptions
	// BeforeWrite, when set, is called once validation has passed and
	// before the first write (and before Record): what must be done
	// before anything is written and may run meanwhile, such as the
	// Sync's finalizer. An error stops the sync with nothing written
	// (ApplyFailed, with the error in its own words after
	// apply.ErrNotPrepared's). Not called for a dry run.
	BeforeWrite func(ctx context.Context) error
	// Record, when set, stores an inventory before the first write (a
	// write-ahead inventory): Run calls it, after validation, with the
	// union of Inventory and the plan's objects when the plan adds
	// objects to Inventory, so that an agent killed in the middle of the
	// sync still knows what it may have written and prunes it later. A
	// sync that adds nothing does not call it. An error stops the sync
	// with nothing written (ApplyFailed, "write-ahead inventory: …").
	Record func(ctx context.Context, entries []plan.Entry) error
}

// Result is what a sync did, or would do when it was a dry run.
type Result struct {
	// Plan is the plan the sync ran (before Known narrowed it).
	Plan plan.Plan
	// Changes lists what happened to every object, in order.
	Changes apply.ChangeSet
	// Inventory is the inventory to record; nil keeps the previous one
	// (a dry run, or a failure before anything was written).
	Inventory []plan.Entry
	// Reason is the Ready=False reason when Err is set.
	Reason string
	Err    error
}

// Run validates the render, plans it against the inventory, applies it
// and prunes: the agent's sync, and `driftless diff`'s when DryRun.
//
// Nothing is written unless every object passed a server-side dry-run
// (see apply.Manager.Apply for the Namespaces and CRDs that may be
// written first). After a partial failure the inventory keeps every
// object of the old and the new set that may exist, so nothing is lost
// from prune; objects whose prune failed stay in it too. Nothing is
// pruned unless every object was applied (and, with waves, healthy).
func Run(ctx context.Context, c client.Client, in Input) Result {
	s := in.Sync
	var res Result
	fail := func(reason string, err error) Result {
		res.Reason, res.Err = reason, err
		return res
	}
	if err := plan.Validate(in.Objects); err != nil {
		return fail(v1alpha1.ReasonBuildFailed, err)
	}
	p := plan.New(in.Objects, in.Inventory)
	// Nothing below reads the render but through the plan, which holds
	// each object's JSON (the closures below hold in).
	in.Objects = nil
	if !s.PruneEnabled() {
		p.Prune = nil
	}
	res.Plan = p
	if err := p.CheckEmpty(s.Spec.AllowEmpty); err != nil {
		return fail(v1alpha1.ReasonPruneRefused, err)
	}

	checks, err := health.Compile(s.Spec.HealthChecks)
	if err != nil {
		return fail(v1alpha1.ReasonInvalidSpec, err)
	}
	opts := apply.DefaultOptions(s.LabelValue())
	if in.Concurrency > 0 {
		opts.Concurrency = in.Concurrency
	}
	opts.DryRun = in.DryRun
	opts.Wait = in.Wait
	opts.Wait.Checks = checks
	opts.Keep, opts.Written, opts.Found = in.Keep, in.Written, in.Found
	record := in.Record != nil && adds(in.Inventory, p.Inventory())
	if !in.DryRun && (in.BeforeWrite != nil || record) {
		opts.BeforeWrite = func(ctx context.Context) error {
			if in.BeforeWrite != nil {
				if err := in.BeforeWrite(ctx); err != nil {
					return err
				}
			}
			if !record {
				return nil
			}
			if err := in.Record(ctx, inventory.Union(in.Inventory, p.Inventory())); err != nil {
				return fmt.Errorf("write-ahead inventory: %w", err)
			}
			return nil
		}
	}
	m := apply.NewManager(c, opts)

	toApply, known := narrow(p, in.Known)
	applied, err := m.Apply(ctx, toApply)
	res.Changes = append(known, applied...)
	if err != nil {
		var ve *apply.ValidationError
		var unhealthy *apply.UnhealthyError
		switch {
		case errors.As(err, &ve):
			if len(ve.Written) > 0 && !in.DryRun {
				// Namespaces and CRDs written before the failing objects
				// could be validated are ours now: track them for prune.
				res.Changes = ve.Written
				res.Inventory = inventory.Union(in.Inventory, inventory.Touched(ve.Written, p))
			}
			reason := v1alpha1.ReasonValidationFailed
			if ve.Conflict() {
				reason = v1alpha1.ReasonConflict
			}
			return fail(reason, err)
		case errors.As(err, &unhealthy):
			// Applied, but not healthy: track what was written, and do
			// not prune until a sync is healthy.
			res.Inventory = inventory.Union(in.Inventory, inventory.Touched(res.Changes, p))
			return fail(v1alpha1.ReasonHealthCheckFailed, err)
		}
		if errors.Is(err, apply.ErrValidationIncomplete) || errors.Is(err, apply.ErrNotPrepared) || in.DryRun {
			// Nothing was written.
			res.Inventory = nil
			return fail(v1alpha1.ReasonApplyFailed, err)
		}
		// A write failed part-way, or a wait was ended by the caller (who
		// words that): keep every object of the old and the new set, so
		// that a partial apply loses track of nothing.
		res.Inventory = inventory.Union(in.Inventory, p.Inventory())
		return fail(v1alpha1.ReasonApplyFailed, err)
	}

	pruned, err := m.Prune(ctx, p.Prune)
	res.Changes = append(res.Changes, pruned...)
	if in.DryRun {
		res.Inventory = nil
		if err != nil {
			return fail(v1alpha1.ReasonPruneFailed, err)
		}
		return res
	}
	res.Inventory = p.Inventory()
	if err != nil {
		res.Inventory = inventory.Union(res.Inventory, inventory.FailedPrunes(p.Prune, err))
		return fail(v1alpha1.ReasonPruneFailed, err)
	}
	return res
}

// adds reports whether next holds an object that stored does not.
func adds(stored, next []plan.Entry) bool {
	have := make(map[plan.ID]bool, len(stored))
	for _, e := range stored {
		have[e.ID] = true
	}
	for _, e := range next {
		if !have[e.ID] {
			return true
		}
	}
	return false
}

// narrow returns p without the steps known to be unchanged, and the
// Unchanged changes reported for those.
func narrow(p plan.Plan, known func(plan.Step) bool) (plan.Plan, apply.ChangeSet) {
	if known == nil {
		return p, nil
	}
	out := p
	out.Apply = make([]plan.Step, 0, len(p.Apply))
	var cs apply.ChangeSet
	for _, step := range p.Apply {
		if known(step) {
			cs = append(cs, apply.Change{ID: step.ID, Origin: step.Object.Origin.String(), Action: apply.Unchanged})
			continue
		}
		out.Apply = append(out.Apply, step)
	}
	return out, cs
}
