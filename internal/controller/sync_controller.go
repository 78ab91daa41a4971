package controller

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// EventRecorder emits events.k8s.io Events; the manager's recorder
// satisfies it.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// SyncReconciler reconciles Sync objects.
type SyncReconciler struct {
	// Client reads and updates Syncs (from the manager's cache).
	Client client.Client
	// Reader reads Secrets directly from the API server, so that the
	// agent never caches every Secret of the cluster.
	Reader client.Reader
	// Applier writes managed objects; it must not cache them.
	Applier client.Client
	// Scope tells render which kinds are namespaced.
	Scope render.ScopeResolver
	// Recorder emits events on Syncs.
	Recorder EventRecorder
	// CacheDir holds one checkout per Sync.
	CacheDir string
	// DryRun makes every Sync report instead of write (agent --dry-run).
	DryRun bool
	// Watches, when set, watches managed objects for drift; while it
	// covers a Sync's kinds and nothing changed in git, an interval costs
	// no request per object. A full comparison still runs every
	// FullResync (default 1h).
	Watches interface {
		Ensure(ctx context.Context, gvks []schema.GroupVersionKind, since time.Time) error
		Covers(gvks []schema.GroupVersionKind) bool
	}
	FullResync time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// desired caches each Sync's last render, by namespace/name.
	desired map[string]rendered
	// lastFull is when each Sync last compared every object.
	lastFull map[string]time.Time
	// applied holds each Sync's last render that was fully applied.
	applied map[string]rendered
}

func (r *SyncReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// rendered is a cached render, valid while the revision and the Sync's
// generation are unchanged.
type rendered struct {
	uid        types.UID
	revision   string
	generation int64
	objects    []render.Object
	index      map[plan.ID]int
}

// Reconcile runs one sync of a Sync and records it.
func (r *SyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var s v1alpha1.Sync
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.Spec.Suspend {
		logger.V(1).Info("suspended; not syncing")
		return ctrl.Result{}, nil
	}
	timeout := 5 * time.Minute
	if s.Spec.Timeout != nil && s.Spec.Timeout.Duration > 0 {
		timeout = s.Spec.Timeout.Duration
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	o := r.sync(syncCtx, &s)
	cancel()

	interval := s.Spec.Interval.Duration
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	if (o.noop(&s.Status) || o.sameReport(&s.Status)) && s.Status.ObservedGeneration == s.Generation {
		logger.V(1).Info("in sync", "revision", o.revision, "unchanged", o.changes.Count(apply.Unchanged))
		return ctrl.Result{RequeueAfter: interval}, nil
	}

	if err := r.writeStatus(ctx, &s, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("update status of Sync %s: %w", req, err)
	}
	if errors.Is(o.err, errSuperseded) {
		// A new revision arrived during a health wait: apply it now.
		logger.Info("a new revision arrived during the health wait; syncing it now", "waited", o.revision)
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	if o.err != nil {
		observeSync(req.String(), o)
		logger.Error(o.err, "sync failed", "reason", o.reason, "revision", o.revision)
		r.Recorder.Eventf(&s, nil, corev1.EventTypeWarning, o.reason, "Sync", "%s", o.message())
		// Retry sooner than the interval for failures that may heal by
		// themselves (an unreachable server); stalled ones wait for a change.
		if o.reason == v1alpha1.ReasonDependencyNotReady {
			// Dependencies' status changes also wake this Sync up.
			return ctrl.Result{RequeueAfter: min(interval, 30*time.Second)}, nil
		}
		if !stalledReasons[o.reason] && interval > 30*time.Second {
			return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
		}
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	observeSync(req.String(), o)
	logger.Info("synced", "revision", o.revision, "summary", o.changes.Summary(), "duration", o.duration, "dryRun", o.dryRun)
	if o.dryRun && o.pending() {
		r.Recorder.Eventf(&s, nil, corev1.EventTypeWarning, v1alpha1.ReasonDriftDetected, "Sync", "%s", o.message())
	} else {
		r.Recorder.Eventf(&s, nil, corev1.EventTypeNormal, v1alpha1.ReasonSucceeded, "Sync", "%s", o.message())
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// writeStatus records o in the Sync's status. It patches with an
// optimistic lock, re-reading on conflict, so that a condition the drift
// reconciler set meanwhile is not overwritten by a stale copy.
func (r *SyncReconciler) writeStatus(ctx context.Context, s *v1alpha1.Sync, o outcome) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return err
			}
		}
		first = false
		base := s.DeepCopy()
		if o.progressed || s.Status.Progress != nil {
			// Make the patch remove the progress written during the sync.
			base.Status.Progress = &v1alpha1.SyncProgress{}
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		s.Status.Progress = nil
		setStatus(&s.Status, s.Generation, o)
		return r.Client.Status().Patch(ctx, s, patch)
	})
}

// sync is the pipeline: fetch → render → plan → apply → prune. Each step
// that fails sets its reason and stops; nothing is pruned unless fetch,
// render and apply succeeded.
func (r *SyncReconciler) sync(ctx context.Context, s *v1alpha1.Sync) outcome {
	o := outcome{started: time.Now()}
	fail := func(reason string, err error) outcome {
		o.reason, o.err = reason, err
		o.duration = time.Since(o.started)
		return o
	}

	if reason, err := r.checkDependencies(ctx, s); err != nil {
		return fail(reason, err)
	}
	req, err := r.sourceRequest(ctx, s)
	if err != nil {
		return fail(v1alpha1.ReasonFetchFailed, err)
	}
	o.revision, err = source.Resolve(ctx, req)
	if err != nil {
		return fail(v1alpha1.ReasonFetchFailed, err)
	}
	if r.watchedAndCurrent(s, o.revision) {
		// Nothing new in git, and the watches report every change in
		// the cluster: no request per object.
		o.duration = time.Since(o.started)
		return o
	}
	o.dryRun = r.DryRun || s.DryRun() ||
		(!s.SelfHealEnabled() && o.revision == s.Status.LastAppliedRevision && s.Generation == s.Status.ObservedGeneration)
	objects, reason, err := r.desiredObjects(ctx, s, req, o.revision)
	if err != nil {
		return fail(reason, err)
	}

	previous, err := inventoryOf(&s.Status)
	if err != nil {
		log.FromContext(ctx).Error(err, "ignoring an unreadable inventory entry")
	}
	if err := plan.Validate(objects); err != nil {
		return fail(v1alpha1.ReasonBuildFailed, err)
	}
	p := plan.New(objects, previous)
	if !s.PruneEnabled() {
		p.Prune = nil
	}
	if err := p.CheckEmpty(s.Spec.AllowEmpty); err != nil {
		return fail(v1alpha1.ReasonPruneRefused, err)
	}

	opts := apply.DefaultOptions(s.LabelValue())
	opts.DryRun = o.dryRun
	var m *apply.Manager
	opts.AfterWave = func(ctx context.Context, w apply.Wave) error {
		if !s.Spec.Wait && w.Last() {
			return nil
		}
		o.progressed = true
		return r.waitForWave(ctx, s, req, o.revision, m, w, len(p.Apply))
	}
	m = apply.NewManager(r.Applier, opts)
	toApply, known := r.onlyChanged(s, p)
	o.changes, err = m.Apply(ctx, toApply)
	o.changes = append(known, o.changes...)
	if err != nil && errors.Is(err, errSuperseded) {
		o.inventory = union(previous, entriesOf(o.changes, p))
		return fail(v1alpha1.ReasonProgressing, err)
	}
	var unhealthy *apply.UnhealthyError
	if errors.As(err, &unhealthy) {
		// Applied, but not healthy: keep track of what was written, and
		// do not prune until a sync is healthy. Drift is reverted to what
		// was applied.
		o.inventory = union(previous, entriesOf(o.changes, p))
		r.publishApplied(s)
		return fail(v1alpha1.ReasonHealthCheckFailed, err)
	}
	if err != nil {
		var ve *apply.ValidationError
		if errors.As(err, &ve) {
			if len(ve.Written) > 0 {
				// Namespaces and CRDs written before the failing objects
				// could be validated are ours now: track them for prune.
				o.changes = ve.Written
				o.inventory = union(previous, entriesOf(ve.Written, p))
			}
			return fail(v1alpha1.ReasonValidationFailed, err)
		}
		// Keep every object of the old and the new set in the inventory:
		// a partial apply must not lose track of anything.
		o.inventory = union(previous, p.Inventory())
		return fail(v1alpha1.ReasonApplyFailed, err)
	}
	pruned, err := m.Prune(ctx, p.Prune)
	o.changes = append(o.changes, pruned...)
	if o.dryRun {
		// Nothing written: the inventory stays. Objects applied before
		// (selfHeal off) are still watched, so drift is reported at once.
		if r.Watches != nil && len(previous) > 0 {
			if err := r.Watches.Ensure(ctx, kindsOf(previous), o.started); err != nil {
				log.FromContext(ctx).Error(err, "cannot watch managed objects; drift is reported at the interval")
			}
		}
		o.duration = time.Since(o.started)
		return o
	}
	o.inventory = p.Inventory()
	if err != nil {
		o.inventory = union(o.inventory, failedPrunes(p.Prune, err))
		return fail(v1alpha1.ReasonPruneFailed, err)
	}
	if r.Watches != nil {
		if err := r.Watches.Ensure(ctx, kindsOf(o.inventory), o.started); err != nil {
			log.FromContext(ctx).Error(err, "cannot watch managed objects; drift is corrected at the interval")
		}
	}
	r.mu.Lock()
	if r.lastFull == nil {
		r.lastFull = map[string]time.Time{}
	}
	key := s.Namespace + "/" + s.Name
	r.lastFull[key] = r.now()
	r.mu.Unlock()
	r.publishApplied(s)
	o.duration = time.Since(o.started)
	return o
}

// onlyChanged narrows the plan to the objects whose rendered form differs
// from the last applied render, when that is safe: the Sync is Ready and
// not drifted, its objects are watched (so a change in the cluster would
// have been seen and reverted), and its last full comparison is recent.
// The other objects are reported Unchanged without a request. Otherwise
// the whole plan is returned.
func (r *SyncReconciler) onlyChanged(s *v1alpha1.Sync, p plan.Plan) (plan.Plan, apply.ChangeSet) {
	if !s.SelfHealEnabled() || !r.watchedAndRecent(s) {
		return p, nil
	}
	r.mu.Lock()
	prev, ok := r.applied[s.Namespace+"/"+s.Name]
	r.mu.Unlock()
	if !ok || prev.uid != s.UID {
		return p, nil
	}
	narrowed := p
	narrowed.Apply = nil
	var known apply.ChangeSet
	for _, step := range p.Apply {
		if i, ok := prev.index[step.ID]; ok && sameRender(prev.objects[i].Object, step.Object.Object) {
			known = append(known, apply.Change{ID: step.ID, Origin: step.Object.Origin.String(), Action: apply.Unchanged})
			continue
		}
		narrowed.Apply = append(narrowed.Apply, step)
	}
	return narrowed, known
}

// sameRender reports whether two renders of an object are the same but
// for the revision in their origin annotation.
func sameRender(a, b *unstructured.Unstructured) bool {
	return apply.Equal(a, b)
}

// publishApplied makes the Sync's current render the one drift is
// reverted to: only a render that was applied, never one that failed
// validation or was not applied yet.
func (r *SyncReconciler) publishApplied(s *v1alpha1.Sync) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.applied == nil {
		r.applied = map[string]rendered{}
	}
	key := s.Namespace + "/" + s.Name
	r.applied[key] = r.desired[key]
}

// watchedAndCurrent reports whether the Sync is at revision with its spec
// unchanged and its render cached, and watchedAndRecent holds: then the
// interval has nothing to do.
func (r *SyncReconciler) watchedAndCurrent(s *v1alpha1.Sync, revision string) bool {
	if revision != s.Status.LastAppliedRevision || s.Generation != s.Status.ObservedGeneration || !r.watchedAndRecent(s) {
		return false
	}
	r.mu.Lock()
	cached, ok := r.desired[s.Namespace+"/"+s.Name]
	r.mu.Unlock()
	return ok && cached.uid == s.UID && cached.revision == revision && cached.generation == s.Generation
}

// watchedAndRecent reports whether a Sync may skip comparing objects that
// git did not change: it writes (not a dry run), is Ready and not drifted,
// its last full comparison is within FullResync, and every kind of its
// inventory is watched, so a change in the cluster would have been seen.
func (r *SyncReconciler) watchedAndRecent(s *v1alpha1.Sync) bool {
	if r.Watches == nil || r.DryRun || s.DryRun() ||
		!meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) ||
		meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionDrifted) {
		return false
	}
	full := r.FullResync
	if full <= 0 {
		full = time.Hour
	}
	r.mu.Lock()
	last, compared := r.lastFull[s.Namespace+"/"+s.Name]
	r.mu.Unlock()
	if !compared || r.now().Sub(last) >= full {
		return false
	}
	inv, err := inventoryOf(&s.Status)
	return err == nil && r.Watches.Covers(kindsOf(inv))
}

// kindsOf returns the distinct kinds (with versions) of an inventory.
func kindsOf(inv []plan.Entry) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, e := range inv {
		gvk := schema.GroupVersionKind{Group: e.ID.Group, Version: e.Version, Kind: e.ID.Kind}
		if !seen[gvk] {
			seen[gvk] = true
			out = append(out, gvk)
		}
	}
	return out
}

// desiredObjects returns the rendered objects of revision, from the cache
// when neither the revision nor the Sync's spec changed since the last
// render.
func (r *SyncReconciler) desiredObjects(ctx context.Context, s *v1alpha1.Sync, req source.Request, revision string) ([]render.Object, string, error) {
	key := s.Namespace + "/" + s.Name
	r.mu.Lock()
	cached, ok := r.desired[key]
	r.mu.Unlock()
	if ok && cached.uid == s.UID && cached.revision == revision && cached.generation == s.Generation {
		return cached.objects, "", nil
	}
	objects, reason, err := Render(ctx, s, req, revision, filepath.Join(r.CacheDir, s.Namespace, s.Name), r.Scope)
	if err != nil {
		return nil, reason, err
	}
	r.mu.Lock()
	if r.desired == nil {
		r.desired = map[string]rendered{}
	}
	index := make(map[plan.ID]int, len(objects))
	for i, o := range objects {
		index[plan.IDOf(o.Object)] = i
	}
	r.desired[key] = rendered{uid: s.UID, revision: revision, generation: s.Generation, objects: objects, index: index}
	r.mu.Unlock()
	return objects, "", nil
}

// Render checks out revision of the Sync's source into dir and renders
// its paths the way the agent does. On failure it also returns the Ready
// reason: FetchFailed or BuildFailed. `driftless diff` uses it to show
// exactly what the agent would apply.
func Render(ctx context.Context, s *v1alpha1.Sync, req source.Request, revision, dir string, scope render.ScopeResolver) ([]render.Object, string, error) {
	if _, err := source.Checkout(ctx, req, revision, dir); err != nil {
		return nil, v1alpha1.ReasonFetchFailed, err
	}
	objects, err := render.Render(render.Options{
		Root:            dir,
		Paths:           s.Spec.Paths,
		Revision:        revision,
		SyncLabel:       s.LabelValue(),
		TargetNamespace: s.Spec.TargetNamespace,
		Scope:           scope,
	})
	if err != nil {
		return nil, v1alpha1.ReasonBuildFailed, fmt.Errorf("revision %s: %w", source.Short(revision), err)
	}
	return objects, "", nil
}

func (r *SyncReconciler) forget(key string) {
	r.mu.Lock()
	delete(r.desired, key)
	delete(r.applied, key)
	delete(r.lastFull, key)
	r.mu.Unlock()
}

func (r *SyncReconciler) sourceRequest(ctx context.Context, s *v1alpha1.Sync) (source.Request, error) {
	return SourceRequest(ctx, r.Reader, s)
}

// SourceRequest builds the fetch request of s, reading its git Secret
// with reader.
func SourceRequest(ctx context.Context, reader client.Reader, s *v1alpha1.Sync) (source.Request, error) {
	g := s.Spec.Source.Git
	req := source.Request{URL: g.URL, Ref: source.Ref{Branch: g.Branch, Tag: g.Tag, Commit: g.Commit}}
	if g.SecretRef != nil {
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: s.Namespace, Name: g.SecretRef.Name}
		if err := reader.Get(ctx, key, &secret); err != nil {
			return req, fmt.Errorf("read git Secret %s: %w", key, err)
		}
		req.Credentials = source.CredentialsFromSecret(secret.Data)
	}
	req.Credentials.InsecureSkipHostKeyCheck = g.InsecureSkipHostKeyCheck
	return req, nil
}

// union returns a ∪ b by ID, keeping a's order first.
func union(a, b []plan.Entry) []plan.Entry {
	seen := map[plan.ID]bool{}
	var out []plan.Entry
	for _, e := range append(append([]plan.Entry{}, a...), b...) {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// entriesOf returns the plan's inventory entries of the changed objects.
func entriesOf(cs apply.ChangeSet, p plan.Plan) []plan.Entry {
	changed := map[plan.ID]bool{}
	for _, c := range cs {
		changed[c.ID] = true
	}
	var out []plan.Entry
	for _, e := range p.Inventory() {
		if changed[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

// failedPrunes returns the entries whose deletion failed: they stay in
// the inventory so the next sync tries again.
func failedPrunes(entries []plan.Entry, err error) []plan.Entry {
	failed := map[plan.ID]bool{}
	for _, id := range apply.FailedIDs(err) {
		failed[id] = true
	}
	var out []plan.Entry
	for _, e := range entries {
		if failed[e.ID] {
			out = append(out, e)
		}
	}
	return out
}
