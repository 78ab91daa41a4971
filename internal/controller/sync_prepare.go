package controller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
)

// prepare is the first stage of a sync: dependencies, target cluster,
// source, revision, variables and keys (engine.PrepareRender), render
// and inventory. It reports done when the sync ends here: failed, or with
// nothing new in git and the watches reporting every change.
func (run *syncRun) prepare(ctx context.Context, id identity) (done bool) {
	r, s, o := run.r, run.s, &run.o
	fail := func(reason string, err error) bool {
		run.fail(reason, err)
		return true
	}
	// What the Sync names is read as the Sync (readerOf); the source's
	// Secrets are not remembered for masking (known_hosts names hosts
	// every fetch error names, and fetch errors never quote a credential).
	reader := readerOf(r.Identities, r.Reader, s, id)
	if reason, err := r.checkDependencies(ctx, s); err != nil {
		return fail(reason, err)
	}
	// The cluster the objects live in: the agent's, or spec.kubeConfig's,
	// which must answer before anything of the sync is asked of it.
	t, reason, err := r.targetOf(ctx, s, id, reader)
	run.tgt = t
	if t.remote != nil {
		o.cluster, o.clusterProxy = t.remote.server, t.remote.proxy
	}
	if err != nil {
		return fail(reason, err)
	}
	req, err := engine.SourceRequest(ctx, reader, s)
	if err != nil {
		return fail(engine.FetchReason(err), err)
	}
	o.revision, err = r.resolve(ctx, s, req)
	if err != nil {
		return fail(v1alpha1.ReasonFetchFailed, err)
	}
	if o.revision, o.hold, err = r.heldRevision(ctx, s, req, o.revision); err != nil {
		return fail(holdFailure(err), err)
	}
	if o.hold == nil {
		o.movedBack = movedBack(s, o.revision)
	}
	// Variables and keys are read every sync: a changed ConfigMap or
	// Secret re-renders.
	run.prepared, reason, err = engine.PrepareRender(ctx, s, req, r.renderIdentity(s, reader, t))
	if err != nil {
		return fail(reason, err)
	}
	run.secrets = engine.VariablesRedactor(run.prepared.Variables)
	// Objects a drift check saw changed and could not act on are
	// compared, whatever the sync would otherwise skip.
	run.marked = r.Store.ToCheck(run.key)
	if len(run.marked) == 0 && !r.mustCompare(s) && r.watchedAndCurrent(s, o.revision, renderDigest(run.prepared, t)) {
		// Nothing new in git, and the watches report every change in
		// the cluster: no request per object.
		o.duration = time.Since(o.started)
		return true
	}
	// With selfHeal off, a revision and spec already applied are only
	// compared: drift is reported, not reverted.
	o.dryRun = r.DryRun || s.DryRun() ||
		(!s.SelfHealEnabled() && o.revision == s.Status.LastAppliedRevision && s.Generation == appliedGeneration(&s.Status))
	if r.Revisions != nil && !o.dryRun && o.revision != s.Status.LastAppliedRevision {
		r.Revisions.Syncing(s, o.revision)
	}
	objects, reason, err := r.desiredObjects(ctx, s, run.prepared, o.revision, t)
	o.commit = r.commitOf(req, o.revision)
	if err != nil {
		return fail(reason, err)
	}
	masked, err := engine.Redactor(run.prepared.Variables, objects)
	if err != nil {
		return fail(v1alpha1.ReasonBuildFailed, err)
	}
	run.secrets = masked
	previous, unreadable, err := r.inventoryOf(ctx, s)
	if err != nil {
		return fail(v1alpha1.ReasonApplyFailed, err)
	}
	if unreadable != nil {
		log.FromContext(ctx).Error(unreadable, "ignoring unreadable inventory entries")
	}
	run.objects, run.previous = objects, previous
	return false
}
