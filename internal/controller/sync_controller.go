package controller

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/notify"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/redact"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// EventRecorder emits events.k8s.io Events; the manager's recorder
// satisfies it.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// RevisionReporter is told how each Sync fares at each revision: the
// commit statuses of internal/notify. Its methods must not block.
type RevisionReporter interface {
	// Syncing: a sync of revision, which the Sync has not applied,
	// started.
	Syncing(s *v1alpha1.Sync, revision string)
	// Synced: a sync of revision ended and was recorded in the status;
	// reason is empty when the Sync is Ready, else the failure's reason;
	// message is the Ready condition's, masked. superseded: a newer
	// revision arrived before it was Ready.
	Synced(s *v1alpha1.Sync, revision, reason, message string, superseded bool)
	// Held: revision, the tip of a held Sync's branch, waits for the
	// hold's release; message is the hold's (holdMessage).
	Held(s *v1alpha1.Sync, revision, message string)
}

// SyncReconciler reconciles Sync objects.
type SyncReconciler struct {
	// Client reads and updates Syncs (from the manager's cache).
	Client client.Client
	// Reader reads Secrets directly from the API server, so that the
	// agent never caches every Secret of the cluster. It reads what the
	// Syncs of the agent's namespace name; with Identities, what a Sync
	// outside it names is read as the Sync's ServiceAccount instead.
	Reader client.Reader
	// Applier writes managed objects as the agent; it must not cache them.
	Applier client.Client
	// Identities, when set, fences Syncs outside the agent's namespace
	// and gives each Sync the client of its ServiceAccount for its
	// objects (Tenancy). Nil: every Sync acts as the agent, through
	// Applier, unfenced.
	Identities *Identities
	// Clusters, when set, are the remote clusters Syncs with
	// spec.kubeConfig apply to; nil refuses such Syncs (InvalidSpec).
	Clusters *Clusters
	// RenderOptions are the agent's render settings (scope, budgets,
	// chart cache). Its Reader is replaced, for each Sync, by the one
	// that reads what the Sync names (Reader, or the Sync's identity).
	RenderOptions engine.RenderOptions
	// Discovery, when set, gives Helm charts the cluster's version and
	// API versions in .Capabilities, read at most once a minute.
	Discovery discovery.DiscoveryInterface
	// Recorder emits events on Syncs.
	Recorder EventRecorder
	// Revisions, when set, is told when a sync of a new revision starts
	// and how it ends (not for dry runs).
	Revisions RevisionReporter
	// CacheDir holds the git mirrors: one per repository and credentials,
	// shared by every Sync that reads it (see source.Mirror).
	CacheDir string
	// DefaultAgeKey is the agent's default key Secret
	// (--sops-age-key-secret), for Syncs in its namespace that name none.
	DefaultAgeKey client.ObjectKey
	// DryRun makes every Sync report instead of write (agent --dry-run).
	DryRun bool
	// ApplyConcurrency bounds the requests one sync, or one deleted
	// Sync's cleanup, keeps in flight (agent --apply-concurrency); 0
	// means apply.DefaultConcurrency.
	ApplyConcurrency int
	// Watches, when set, watches managed objects for drift; while it
	// covers a Sync's kinds and nothing changed in git, an interval costs
	// no request per object. A full comparison still runs every
	// FullResync (default 1h).
	Watches    watcher
	FullResync time.Duration
	// Store holds each Sync's render cache and what it applied; the drift
	// reconciler reads the same Store.
	Store *Store
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mirrorOnce sync.Once
	mirror     *source.Mirror
	// HoldStamps, when set (the agent serves its admission webhook),
	// checks that a hold's by is the user who wrote it; without it, or
	// when it does not check out, the hold is named as claimed by.
	HoldStamps HoldVerifier
	// Fights are the drift reconciler's reverts and their pauses (its
	// History): a sync leaves an object whose reverts are paused alone.
	Fights *drift.History
	// woken holds, by client.ObjectKey, the wokenRevision of each Sync
	// woken and not synced since.
	woken        sync.Map
	capabilities capabilities
	// lost holds, by client.ObjectKey, the note of a Sync whose Inventory
	// was found missing (missingInventory), until its status says so.
	lost sync.Map
	// notifier receives the events of Notify's recorders; nil without
	// notification targets.
	notifier *notify.Dispatcher
}

// Notify returns rec, also handing its events about Syncs to the agent's
// notifications when targets are configured (the image controllers'
// events go out as the Sync controller's do).
func (r *SyncReconciler) Notify(rec notify.Recorder) notify.Recorder {
	if r.notifier == nil {
		return rec
	}
	return notify.Wrap(rec, r.notifier)
}

// Mirror returns the git mirror the Syncs read from, in CacheDir.
func (r *SyncReconciler) Mirror() *source.Mirror {
	r.mirrorOnce.Do(func() {
		r.mirror = &source.Mirror{Dir: filepath.Join(r.CacheDir, "mirrors"), Log: ctrl.Log.WithName("mirror")}
	})
	return r.mirror
}

// applyConcurrency is ApplyConcurrency, or apply.DefaultConcurrency.
func (r *SyncReconciler) applyConcurrency() int {
	if r.ApplyConcurrency > 0 {
		return r.ApplyConcurrency
	}
	return apply.DefaultConcurrency
}

func (r *SyncReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile runs one sync of a Sync and records it.
func (r *SyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	// A wake-up's priority (wakeSource) orders that one sync; a retry or
	// the next interval queues at the default priority.
	if res.RequeueAfter > 0 || err != nil {
		res.Priority = ptr.To(0)
	}
	return res, err
}

func (r *SyncReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var s v1alpha1.Sync
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.Store.Forget(req.NamespacedName)
			r.releaseWatches(req.NamespacedName)
			r.Clusters.Release(req.NamespacedName)
			r.woken.Delete(req.NamespacedName)
			forgetSync(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &s)
	}
	// The finalizer's patch runs while the sync reads git, renders and
	// validates; nothing is written for s before it is in.
	finalizer := r.addFinalizer(ctx, &s)
	if s.Spec.Suspend {
		if err := finalizer.wait(ctx, &s); err != nil {
			return ctrl.Result{}, err
		}
		logger.V(1).Info("suspended; not syncing")
		// The sync after the resume compares every object.
		r.Store.SetCompareAll(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if err := checkSpec(&s, r.Identities.tenancy()); err != nil {
		if err := finalizer.wait(ctx, &s); err != nil {
			return ctrl.Result{}, err
		}
		return r.stallOnSpec(ctx, &s, v1alpha1.ReasonInvalidSpec, err)
	}
	id, err := r.identityOf(&s)
	if err != nil {
		if err := finalizer.wait(ctx, &s); err != nil {
			return ctrl.Result{}, err
		}
		if errors.Is(err, errServiceAccountRequired) {
			return r.stallOnSpec(ctx, &s, v1alpha1.ReasonServiceAccountRequired, err)
		}
		return ctrl.Result{}, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout(&s))
	o := r.sync(syncCtx, &s, id, finalizer)
	cancel()
	// The sync waited for the finalizer before its first write; one that
	// wrote nothing has not: no status is written without it either.
	if err := finalizer.wait(ctx, &s); err != nil {
		return ctrl.Result{}, err
	}
	observeFailure(req.String(), o)
	o.inventoryLost = r.takeLost(req.NamespacedName)

	interval := s.Spec.Interval.Duration
	if interval <= 0 {
		interval = v1alpha1.DefaultInterval
	}
	// A requested sync (driftless reconcile) is always recorded.
	// A status that still lists the inventory is written once, to move it.
	if (o.noop(&s.Status) || o.sameReport(&s.Status)) && s.Status.ObservedGeneration == s.Generation && !requestPending(&s) &&
		(len(s.Status.Inventory) == 0 || o.inventory == nil) && o.inventoryLost == "" {
		logger.V(1).Info("in sync", "revision", o.revision, "unchanged", o.changes.Count(apply.Unchanged))
		if o.compared && !o.dryRun && r.comparedLongAgo(&s.Status, o.started) {
			// Nothing to record but the comparison: say when it was.
			if err := r.writeCompared(ctx, &s, o); err != nil {
				return ctrl.Result{}, fmt.Errorf("update status of Sync %s: %w", req, err)
			}
		}
		return ctrl.Result{RequeueAfter: interval}, nil
	}

	// A new commit that changed none of this Sync's objects is recorded
	// in its status, without an event: a fleet of Syncs reading one
	// repository would otherwise send one per Sync and commit.
	quiet := o.unchangedSince(&s.Status) && !requestPending(&s)
	if err := r.writeStatus(ctx, &s, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("update status of Sync %s: %w", req, err)
	}
	if r.Revisions != nil && o.revision != "" && !o.dryRun && !r.DryRun && !s.DryRun() {
		r.Revisions.Synced(&s, o.revision, o.reason, o.message(), errors.Is(o.err, errSuperseded))
	}
	r.reportHeld(&s, o)
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
		if o.reason == v1alpha1.ReasonClusterUnreachable && o.retry > 0 {
			// Backs off while the cluster stays away (cluster.go).
			return ctrl.Result{RequeueAfter: min(interval, o.retry)}, nil
		}
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
	switch {
	case o.dryRun && o.pending():
		r.Recorder.Eventf(&s, nil, corev1.EventTypeWarning, v1alpha1.ReasonDriftDetected, "Sync", "%s", o.message())
	case quiet:
	default:
		r.Recorder.Eventf(&s, nil, corev1.EventTypeNormal, v1alpha1.ReasonSucceeded, "Sync", "%s", o.message())
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// writeStatus records o in the Sync's status. It patches with an
// optimistic lock, re-reading on conflict, so that a condition the drift
// reconciler set meanwhile is not overwritten by a stale copy.
func (r *SyncReconciler) writeStatus(ctx context.Context, s *v1alpha1.Sync, o outcome) error {
	return r.patchStatus(ctx, s, func() error {
		base := s.DeepCopy()
		if o.progressed || s.Status.Progress != nil {
			// Make the patch remove the progress written during the sync.
			base.Status.Progress = &v1alpha1.SyncProgress{}
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		s.Status.Progress = nil
		setStatus(&s.Status, s.Generation, o)
		if o.inventory != nil {
			s.Status.InventoryRef = inventory.Ref(s, o.inventory)
			s.Status.Inventory = nil // moved to the Inventory, if it was here
		}
		return r.Client.Status().Patch(ctx, s, patch)
	})
}

// patchStatus calls patch, which patches s's status with an optimistic
// lock, until it does not conflict, reading s from the API server again
// before each new try.
func (r *SyncReconciler) patchStatus(ctx context.Context, s *v1alpha1.Sync, patch func() error) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return err
			}
		}
		first = false
		return patch()
	})
}

// comparedLongAgo reports whether the status's record of the last full
// comparison is missing or at least half a FullResync older than now. A
// comparison that found nothing is recorded only then: an agent restarted
// over Syncs in sync writes nothing (the recorded time stays true: every
// live object was compared then), and the hourly comparison is recorded.
func (r *SyncReconciler) comparedLongAgo(st *v1alpha1.SyncStatus, now time.Time) bool {
	return st.LastComparedAt == nil || now.Sub(st.LastComparedAt.Time) >= r.fullResync()/2
}

// fullResync is how often every object is compared (FullResync, or the
// default).
func (r *SyncReconciler) fullResync() time.Duration {
	if r.FullResync <= 0 {
		return DefaultOptions().FullResync
	}
	return r.FullResync
}

// writeCompared records that a sync which changed nothing compared every
// live object (o.compared): status.lastComparedAt, and the Drifted
// condition's message, which says so. Nothing else of the status moves.
func (r *SyncReconciler) writeCompared(ctx context.Context, s *v1alpha1.Sync, o outcome) error {
	return r.patchStatus(ctx, s, func() error {
		if meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionDrifted) {
			return nil // an incident came in meanwhile: it says more
		}
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		s.Status.LastComparedAt = &metav1.Time{Time: o.started.UTC().Truncate(time.Second)}
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse,
			ObservedGeneration: s.Generation, Reason: v1alpha1.ReasonInSync, Message: o.inSyncMessage()})
		return r.Client.Status().Patch(ctx, s, patch)
	})
}

// mustCompare reports whether the next sync of s compares every object
// with the cluster, as the first sync after a start does, whatever the
// watches say: a sync was requested (driftless reconcile), or the Sync was
// seen unable to write since its last full comparison (Store.CompareAll:
// suspended, a dry run, selfHeal off) — so the sync after a resume, a
// switch from DryRun to Apply or selfHeal turned on puts back what
// changed meanwhile —, or the agent missed a version of the spec (one of
// them may have been such a pause: a suspend and a resume in quick
// succession). Other spec changes do not: they cost what a new revision
// costs.
func (r *SyncReconciler) mustCompare(s *v1alpha1.Sync) bool {
	return requestPending(s) || r.Store.CompareAll(client.ObjectKeyFromObject(s)) || missedSpec(s)
}

// missedSpec reports whether s's spec changed more than once since the
// agent last recorded a sync of it (status.observedGeneration), so that
// it did not see every version of the spec.
func missedSpec(s *v1alpha1.Sync) bool {
	return s.Status.ObservedGeneration > 0 && s.Generation-s.Status.ObservedGeneration > 1
}

// comparedMarks returns the objects of marked that a sync compared with
// the cluster and settled: every object it wrote or found equal, and for
// a dry run only those found equal (a drift it reported is still to be
// put back).
func comparedMarks(marked map[plan.ID]bool, changes apply.ChangeSet, dryRun bool) []plan.ID {
	var ids []plan.ID
	for _, c := range changes {
		if marked[c.ID] && (!dryRun || c.Action == apply.Unchanged) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// revertedDrift words the drift a sync put back: each object whose render
// was what had been applied before (so git did not change it) and that
// the sync configured, with the fields it changed, from what to what and
// who had changed them, as a drift check's incident says it. Values from
// Secrets (secrets) are masked.
func revertedDrift(changes apply.ChangeSet, byID map[plan.ID]render.Object, secrets *redact.Set) []string {
	var out []string
	for _, c := range changes {
		if c.Action != apply.Configured || c.Live == nil || c.Applied == nil {
			continue
		}
		obj, err := byID[c.ID].Decode()
		if err != nil {
			continue
		}
		fields := driftFields(obj, c.Applied, c.Live, apply.FieldManager, secrets)
		parts := make([]string, 0, len(fields))
		for _, f := range fields {
			parts = append(parts, f.Bound().String())
		}
		if len(parts) == 0 {
			parts = append(parts, "fields git sets were changed")
		}
		out = append(out, c.ID.String()+" "+strings.Join(parts, "; "))
	}
	return out
}

// uncertain returns the objects a failed sync leaves no drift check may
// revert: a write that failed may have happened or not (a forced
// re-creation may have deleted the object), and an object the sync meant
// to prune is not in git any more. The next sync decides for them.
func uncertain(res engine.Result) []plan.ID {
	var ve *apply.ValidationError
	if errors.As(res.Err, &ve) || errors.Is(res.Err, apply.ErrValidationIncomplete) || errors.Is(res.Err, apply.ErrNotPrepared) {
		return nil // nothing failed to be written
	}
	ids := apply.FailedIDs(res.Err)
	if res.Reason == v1alpha1.ReasonPruneFailed {
		for _, e := range res.Plan.Prune {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// appliedGeneration is the generation last applied: lastAppliedGeneration,
// or, for a Sync last recorded before that field existed, the observed
// generation of a sync that succeeded.
func appliedGeneration(st *v1alpha1.SyncStatus) int64 {
	if st.LastAppliedGeneration == 0 {
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil &&
			c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonSucceeded {
			return st.ObservedGeneration
		}
	}
	return st.LastAppliedGeneration
}

// knownUnchanged returns, when it is safe, a test for objects whose
// render is the same as the one last applied (same): the Sync is Ready
// and not drifted, its objects are watched (so a change in the cluster
// would have been seen and reverted), its last full comparison is recent,
// and nothing asks for a comparison (mustCompare). Such objects are
// reported Unchanged without a request, except those marked to check.
// Otherwise nil: every object is compared.
func (r *SyncReconciler) knownUnchanged(s *v1alpha1.Sync, same func(plan.ID) bool, marked map[plan.ID]bool) func(plan.Step) bool {
	if !s.SelfHealEnabled() || r.mustCompare(s) || !r.watchedAndRecent(s) {
		return nil
	}
	return func(step plan.Step) bool { return !marked[step.ID] && same(step.ID) }
}

// known returns the objects the sync need not compare with the cluster
// (engine.Input.Known; nil: every object is compared), and whether the
// Inventory's digests told them (the first sync after a start): those the
// watches saw unchanged, and those whose drift reverts are paused by a
// fight (DriftReconciler), which the sync leaves as the other writer has
// them until the pause ends, unless their render changed.
func (r *SyncReconciler) known(ctx context.Context, s *v1alpha1.Sync, same func(plan.ID) bool, marked map[plan.ID]bool, byID map[plan.ID]render.Object,
	started time.Time) (func(plan.Step) bool, bool) {
	known, fromDigests := r.knownUnchanged(s, same, marked), false
	if known == nil {
		// The first sync after a start: what the Inventory's digests
		// show unchanged is not compared again.
		known = r.startKnown(ctx, s, byID, marked, started)
		fromDigests = known != nil
	}
	prefix, now := client.ObjectKeyFromObject(s).String()+"/", r.now()
	if r.Fights == nil || !r.Fights.AnyPaused(prefix, now) {
		return known, fromDigests
	}
	return func(step plan.Step) bool {
		if known != nil && known(step) {
			return true
		}
		return same(step.ID) && r.Fights.Paused(prefix+step.ID.String(), now)
	}, fromDigests
}

// sameAsApplied returns a test for objects of byID (the render) that are
// what the Sync last applied (w, the sync's hold on its gate): the
// render's JSON equal to what was applied, told without decoding it (at
// 10,000 objects, decoding each one again cost a one-object commit most
// of a second), or else the same object once decoded.
func sameAsApplied(w *Writer, byID map[plan.ID]render.Object) func(plan.ID) bool {
	return func(id plan.ID) bool {
		o, desired := byID[id]
		if !desired {
			return false
		}
		if w.AppliedJSONEquals(id, o.JSON) {
			return true
		}
		prev, ok := w.Applied(id)
		if !ok {
			return false
		}
		before, err := prev.Decode()
		if err != nil {
			return false
		}
		obj, err := o.Decode()
		return err == nil && apply.Equal(before, obj)
	}
}

// watchedAndCurrent reports whether the Sync is at revision with its spec
// unchanged and its render cached, and watchedAndRecent holds: then the
// interval has nothing to do.
func (r *SyncReconciler) watchedAndCurrent(s *v1alpha1.Sync, revision, variables string) bool {
	if revision != s.Status.LastAppliedRevision || s.Generation != appliedGeneration(&s.Status) || !r.watchedAndRecent(s) {
		return false
	}
	return r.Store.HasRendered(client.ObjectKeyFromObject(s), RenderKey{UID: s.UID, Revision: revision, Generation: s.Generation, Variables: variables})
}

// watchedAndRecent reports whether a Sync may skip comparing objects that
// git did not change: it writes (not a dry run), is Ready and not drifted,
// its last full comparison is within FullResync, and every kind of its
// inventory is watched, so a change in the cluster would have been seen.
func (r *SyncReconciler) watchedAndRecent(s *v1alpha1.Sync) bool {
	watches := r.watchesOf(s)
	if watches == nil || r.DryRun || s.DryRun() ||
		!meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) ||
		meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionDrifted) {
		return false
	}
	last, compared := r.Store.LastFull(client.ObjectKeyFromObject(s))
	if !compared || r.now().Sub(last) >= r.fullResync() {
		return false
	}
	inv, ok := r.Store.Inventory(client.ObjectKeyFromObject(s), s.UID)
	return ok && watches.Covers(kindsOf(inv))
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

// kindsAhead returns the kinds whose drift watches a sync of objects over
// the inventory previous starts before it writes (watchAhead): every kind
// of previous (held already: the sync does not let go of them while it
// writes), and every kind of objects but those a CustomResourceDefinition
// of objects defines, which the API server may not serve before the sync
// writes it (a watch that cannot list is refused, and not tried again for
// a while).
func kindsAhead(objects []render.Object, previous []plan.Entry) []schema.GroupVersionKind {
	defined := map[schema.GroupKind]bool{}
	for _, o := range objects {
		if !o.Defines.Empty() {
			defined[o.Defines] = true
		}
	}
	out := kindsOf(previous)
	seen := make(map[schema.GroupVersionKind]bool, len(out))
	for _, gvk := range out {
		seen[gvk] = true
	}
	for _, o := range objects {
		if !seen[o.GVK] && !defined[o.GVK.GroupKind()] {
			seen[o.GVK] = true
			out = append(out, o.GVK)
		}
	}
	return out
}

// watchAhead starts the drift watches of kinds for the Sync key (w.Ensure)
// in the background and returns what is closed once they have listed, or
// failed to: the caller waits for it before it ensures its watches again,
// which reports what did not start. Nil when w is nil or kinds empty.
func watchAhead(ctx context.Context, w watcher, key client.ObjectKey, kinds []schema.GroupVersionKind, since time.Time) <-chan struct{} {
	if w == nil || len(kinds) == 0 {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Ensure(ctx, key, kinds, since)
	}()
	return done
}

// desiredObjects returns the rendered objects of revision, from the Store
// when neither the Sync's inputs, its spec nor its variables changed
// since the last render: the same revision, or for a render of plain
// manifests a new revision that left the Sync's paths as they were (a
// commit to another app of the repository).
func (r *SyncReconciler) desiredObjects(ctx context.Context, s *v1alpha1.Sync, p *engine.Prepared, revision string, tgt target) ([]render.Object, string, error) {
	key := client.ObjectKeyFromObject(s)
	req := p.Request
	made := RenderKey{UID: s.UID, Revision: revision, Generation: s.Generation, Variables: renderDigest(p, tgt)}
	if objects, ok := r.Store.Rendered(key, made); ok {
		return objects, "", nil
	}
	inputs, known, err := r.Mirror().PathsDigest(ctx, req, revision, s.Spec.Paths)
	if err != nil {
		return nil, engine.FetchReason(err), err
	}
	if known {
		made.Inputs = inputs
	}
	if objects, ok := r.Store.RenderedInputs(key, made); ok {
		r.Store.SetRendered(key, made, objects)
		return objects, "", nil
	}
	opts := p.Options // valuesFrom and chart secretRefs read as the Sync
	if dc, cache := r.discoveryOf(tgt); dc != nil {
		var err error
		if opts.KubeVersion, opts.APIVersions, err = cache.get(dc, r.now()); err != nil {
			reason, err := tgt.unreachable(v1alpha1.ReasonFetchFailed, err)
			return nil, reason, err
		}
	}
	tree, err := r.Mirror().Checkout(ctx, req, revision)
	if err != nil {
		return nil, engine.FetchReason(err), err
	}
	defer tree.Release()
	opts.Cache = r.Store.GeneratorCache(key)
	built, reused := opts.Cache.Builds()
	defer func() {
		b, r := opts.Cache.Builds()
		kustomizeBuilds.WithLabelValues("built").Add(float64(b - built))
		kustomizeBuilds.WithLabelValues("reused").Add(float64(r - reused))
	}()
	renders.Inc()
	var outside, beyond atomic.Bool
	opts.ReadOutside = func() { outside.Store(true) }
	opts.ReadsBeyondPaths = func() { beyond.Store(true) }
	objects, reason, err := engine.RenderTree(ctx, s, tree.Dir, revision, opts)
	if err != nil {
		return nil, reason, err
	}
	if beyond.Load() {
		// A kustomization or chart may read files outside the paths,
		// even one that made no object.
		made.Inputs = ""
	}
	if outside.Load() {
		// A chart from a repository (a range picks up a new version) or
		// valuesFrom may change without a commit: render again next time.
		// Objects that did not change still cost no request (see known).
		made.Revision, made.Inputs = "", ""
	}
	r.Store.SetRendered(key, made, objects)
	return objects, "", nil
}

// capabilitiesTTL is how long the cluster's version and API versions,
// which charts see in .Capabilities, are reused before being read again:
// a full discovery costs a request per API group.
const capabilitiesTTL = time.Minute

// capabilities caches what discovery said for charts' .Capabilities.
type capabilities struct {
	mu          sync.Mutex
	at          time.Time
	kubeVersion string
	apiVersions []string
}

func (c *capabilities) get(dc discovery.DiscoveryInterface, now time.Time) (string, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && now.Sub(c.at) < capabilitiesTTL {
		return c.kubeVersion, c.apiVersions, nil
	}
	v, versions, err := engine.Capabilities(dc)
	if err != nil {
		return "", nil, err
	}
	c.at, c.kubeVersion, c.apiVersions = now, v, versions
	return v, versions, nil
}
