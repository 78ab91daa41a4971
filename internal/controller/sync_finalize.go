package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
)

// defaultTimeout bounds one sync, and the cleanup of a deleted Sync's
// objects, when spec.timeout is not set.
const defaultTimeout = v1alpha1.DefaultTimeout

// finalizeRetry is how soon a cleanup that failed is tried again, within
// spec.timeout of the deletion.
const finalizeRetry = 10 * time.Second

// syncTimeout is the Sync's spec.timeout, or defaultTimeout.
func syncTimeout(s *v1alpha1.Sync) time.Duration {
	if s.Spec.Timeout != nil && s.Spec.Timeout.Duration > 0 {
		return s.Spec.Timeout.Duration
	}
	return defaultTimeout
}

// finalizerPatch adds v1alpha1.Finalizer to a Sync, so that deleting it
// waits for finalize. It is sent at once and waited for only before the
// sync's first write and before its status is written: a new Sync's
// first sync resolves, renders and validates meanwhile, one request
// shorter on its path to Ready (#30).
type finalizerPatch struct {
	done chan struct{}
	// patched is the Sync as the patch returned it, err why it failed;
	// both are set before done is closed.
	patched *v1alpha1.Sync
	err     error
	// taken is set once wait has given s the patched metadata.
	taken bool
}

// addFinalizer starts adding v1alpha1.Finalizer to s, with an optimistic
// lock; nil when s has it. s itself is not touched until wait.
func (r *SyncReconciler) addFinalizer(ctx context.Context, s *v1alpha1.Sync) *finalizerPatch {
	if controllerutil.ContainsFinalizer(s, v1alpha1.Finalizer) {
		return nil
	}
	p := &finalizerPatch{done: make(chan struct{}), patched: s.DeepCopy()}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(p.patched, v1alpha1.Finalizer)
	go func() {
		defer close(p.done)
		if err := r.Client.Patch(ctx, p.patched, patch); err != nil {
			p.err = fmt.Errorf("add finalizer %s to Sync %s/%s: %w", v1alpha1.Finalizer, s.Namespace, s.Name, err)
		}
	}()
	return p
}

// wait waits until the patch is done and returns its error; the first
// time it succeeds, s gets the metadata the patch returned (the
// finalizer, and the resourceVersion its status's optimistic lock
// needs). Only the goroutine that owns s calls it, before s is written
// again. A nil patch returns nil at once.
func (p *finalizerPatch) wait(ctx context.Context, s *v1alpha1.Sync) error {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("add finalizer %s to Sync %s/%s: %w", v1alpha1.Finalizer, s.Namespace, s.Name, ctx.Err())
	}
	if p.err == nil && !p.taken {
		p.patched.ObjectMeta.DeepCopyInto(&s.ObjectMeta)
		p.taken = true
	}
	return p.err
}

// failed returns the patch's error if it has failed already, without
// waiting: a sync checks it before its dry runs, which a failed patch
// would waste (the sync stops before its first write, with no status).
func (p *finalizerPatch) failed() error {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// finalize cleans up after a Sync being deleted, as spec.deletionPolicy
// says, then removes its finalizer so that it goes.
//
// Orphan (the default, and the policy of a suspended Sync) removes the
// driftless.dev/sync label from every object of the inventory that still
// carries this Sync's value; Delete deletes those objects in reverse apply
// order, like a prune, and orphans the ones annotated driftless.dev/prune:
// disabled. Objects labelled for another Sync are not touched. A dry run
// (the agent's --dry-run or spec.mode DryRun) writes nothing.
//
// When an object cannot be cleaned up (an admission webhook refuses, the
// API server fails), the Sync stays, a DeletionFailed event says what and
// why, and the cleanup is retried every finalizeRetry until spec.timeout
// has passed since the deletion, or until the Sync is annotated
// driftless.dev/force-delete: enabled. Then the Sync goes anyway: objects
// whose deletion failed get their label removed if that still works, and
// a LeftBehind event names every object left behind.
func (r *SyncReconciler) finalize(ctx context.Context, s *v1alpha1.Sync) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s, v1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx)
	key := client.ObjectKeyFromObject(s)
	// From now on no drift check puts an object back: nothing is desired.
	w := r.Store.BeginWrite(key, s.UID)
	w.Replace(nil)
	w.Release()

	entries, unreadable, err := r.inventoryOf(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	timeout := syncTimeout(s)
	cleanCtx, cancel := context.WithTimeout(ctx, timeout)
	c := r.cleanUp(cleanCtx, s, entries)
	cancel()
	applier := c.client

	eventType, reason, msg := corev1.EventTypeNormal, v1alpha1.ReasonOrphaned, c.summary()
	if c.policy == v1alpha1.DeletionDelete {
		reason = v1alpha1.ReasonDeleted
	}
	if len(c.failed) > 0 {
		deadline := s.DeletionTimestamp.Add(timeout)
		forced := s.Annotations[v1alpha1.ForceDeleteAnnotation] == v1alpha1.Enabled
		if now := r.now(); !forced && now.Before(deadline) {
			msg := fmt.Sprintf("%s; retrying until %s (spec.timeout %s after the deletion); to delete the Sync now and leave them, "+
				"annotate it %s=%s", c.failures(), deadline.UTC().Format(time.RFC3339), timeout, v1alpha1.ForceDeleteAnnotation, v1alpha1.Enabled)
			if done := c.done(); done != "" {
				msg += "; done so far: " + done
			}
			logger.Info("cleanup of a deleted Sync failed; retrying", "failed", len(c.failed), "until", deadline)
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonDeletionFailed, "Delete", "%s", truncate(msg))
			return ctrl.Result{RequeueAfter: min(finalizeRetry, deadline.Sub(now))}, nil
		}
		why := fmt.Sprintf("spec.timeout %s passed since the deletion", timeout)
		if forced {
			why = fmt.Sprintf("annotated %s: %s", v1alpha1.ForceDeleteAnnotation, v1alpha1.Enabled)
		}
		if c.policy == v1alpha1.DeletionDelete && !c.dryRun {
			r.unlabelLeftovers(ctx, applier, s.LabelValue(), entries, c.failed)
		}
		eventType, reason = corev1.EventTypeWarning, v1alpha1.ReasonLeftBehind
		msg = fmt.Sprintf("Sync deleted (deletionPolicy %s, %s) leaving behind %s", c.policy, why, c.leftBehind())
		if done := c.done(); done != "" {
			msg += "; " + done
		}
	}
	if unreadable != nil {
		msg += fmt.Sprintf("; left as they are: %v", unreadable)
	}
	if err := r.removeFinalizer(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.Store.Forget(key)
	r.releaseWatches(key)
	r.Clusters.Release(key)
	logger.Info("Sync deleted", "reason", reason, "message", msg)
	r.Recorder.Eventf(s, nil, eventType, reason, "Delete", "%s", truncate(msg))
	return ctrl.Result{}, nil
}

// releaseWatches lets go of what the Sync key held in the agent's own
// cluster's drift watches (Clusters.Release does so in a remote one).
func (r *SyncReconciler) releaseWatches(key client.ObjectKey) {
	if r.Watches != nil {
		r.Watches.Release(key)
	}
}

// removeFinalizer removes v1alpha1.Finalizer from s, re-reading it on a
// conflict so that other finalizers are kept.
func (r *SyncReconciler) removeFinalizer(ctx context.Context, s *v1alpha1.Sync) error {
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return err
			}
		}
		first = false
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(s, v1alpha1.Finalizer)
		return r.Client.Patch(ctx, s, patch)
	})
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("remove finalizer %s from Sync %s/%s: %w", v1alpha1.Finalizer, s.Namespace, s.Name, err)
	}
	return nil
}

// cleanup is what finalize did, or in a dry run would do, to the objects
// of a deleted Sync.
type cleanup struct {
	// policy is the one applied: Orphan for a suspended Sync.
	policy    v1alpha1.DeletionPolicy
	suspended bool
	dryRun    bool
	deleted   []plan.ID
	orphaned  []plan.ID
	failed    []leftover
	// client is the identity the Sync acts as; nil when it has none.
	client client.Client
}

// leftover is an object the cleanup could not delete or unlabel.
type leftover struct {
	id  plan.ID
	err error
	// unlabelled: its deletion failed, and its label was removed when
	// finalize gave up.
	unlabelled bool
}

// cleanUp orphans or deletes the objects of entries, as s's policy says.
func (r *SyncReconciler) cleanUp(ctx context.Context, s *v1alpha1.Sync, entries []plan.Entry) cleanup {
	c := cleanup{policy: s.Spec.DeletionPolicy, suspended: s.Spec.Suspend, dryRun: r.DryRun || s.DryRun()}
	if c.policy != v1alpha1.DeletionDelete || c.suspended {
		c.policy = v1alpha1.DeletionOrphan
	}
	owner := s.LabelValue()
	// The cleanup acts as the Sync does: a tenant cannot delete through
	// its Sync what it could not have applied.
	id, err := r.identityOf(s)
	if err == nil {
		// In the cluster the objects live in (spec.kubeConfig).
		var t target
		t, _, err = r.targetOf(ctx, s, id, readerOf(r.Identities, r.Reader, s, id))
		id = t.id
	}
	if err != nil {
		for _, e := range entries {
			c.failed = append(c.failed, leftover{id: e.ID, err: err})
		}
		return c
	}
	c.client = id.client
	if c.policy == v1alpha1.DeletionOrphan {
		c.orphaned, c.failed = orphan(ctx, c.client, owner, entries, c.dryRun, r.applyConcurrency())
		return c
	}
	opts := apply.DefaultOptions(owner)
	opts.DryRun, opts.Concurrency = c.dryRun, r.applyConcurrency()
	cs, err := apply.NewManager(c.client, opts).Prune(ctx, plan.New(nil, entries).Prune)
	byID := make(map[plan.ID]plan.Entry, len(entries))
	for _, e := range entries {
		byID[e.ID] = e
	}
	var kept []plan.Entry
	for _, ch := range cs {
		switch ch.Action {
		case apply.Pruned:
			c.deleted = append(c.deleted, ch.ID)
		case apply.Skipped:
			// Opted out of prune, or another Sync's now: orphan checks
			// the label and unlabels only this Sync's.
			kept = append(kept, byID[ch.ID])
		}
	}
	for _, oe := range apply.ObjectErrors(err) {
		cause := errors.Unwrap(oe.Err) // without Prune's "prune failed: "
		if cause == nil {
			cause = oe.Err
		}
		c.failed = append(c.failed, leftover{id: oe.ID, err: cause})
	}
	orphaned, failed := orphan(ctx, c.client, owner, kept, c.dryRun, r.applyConcurrency())
	c.orphaned = orphaned
	c.failed = append(c.failed, failed...)
	return c
}

// unlabelLeftovers removes the label of the objects whose deletion failed,
// when finalize gives up on them, and notes which ones it could unlabel.
func (r *SyncReconciler) unlabelLeftovers(ctx context.Context, applier client.Client, owner string, entries []plan.Entry, failed []leftover) {
	if applier == nil {
		return // no identity to act as
	}
	byID := make(map[plan.ID]plan.Entry, len(entries))
	for _, e := range entries {
		byID[e.ID] = e
	}
	for i := range failed {
		if e, ok := byID[failed[i].id]; ok {
			done, err := unlabel(ctx, applier, owner, e, false)
			failed[i].unlabelled = done && err == nil
		}
	}
}

// orphan removes the driftless.dev/sync label from the objects of entries
// that still carry owner, concurrently. It returns those it unlabelled
// (or would, in a dry run) and those it could not.
func orphan(ctx context.Context, c client.Client, owner string, entries []plan.Entry, dryRun bool, concurrency int) ([]plan.ID, []leftover) {
	type result struct {
		done bool
		err  error
	}
	results := make([]result, len(entries))
	var g errgroup.Group
	g.SetLimit(concurrency)
	for i, e := range entries {
		g.Go(func() error {
			results[i].done, results[i].err = unlabel(ctx, c, owner, e, dryRun)
			return nil
		})
	}
	_ = g.Wait()
	var orphaned []plan.ID
	var failed []leftover
	for i, res := range results {
		switch {
		case res.err != nil:
			failed = append(failed, leftover{id: entries[i].ID, err: res.err})
		case res.done:
			orphaned = append(orphaned, entries[i].ID)
		}
	}
	return orphaned, failed
}

// syncLabelPointer is the JSON pointer of the driftless.dev/sync label.
var syncLabelPointer = "/metadata/labels/" + strings.ReplaceAll(v1alpha1.SyncLabel, "/", "~1")

// unlabel removes the driftless.dev/sync label from the object of e if
// its value is still owner, with a JSON patch that tests the value first,
// so that an object another Sync took meanwhile keeps its label. It
// reports whether it removed it (or would, in a dry run); an object that
// is gone, or not owner's, is left alone.
func unlabel(ctx context.Context, c client.Client, owner string, e plan.Entry, dryRun bool) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: e.ID.Group, Version: e.Version, Kind: e.ID.Kind})
	err := c.Get(ctx, client.ObjectKey{Namespace: e.ID.Namespace, Name: e.ID.Name}, obj)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, err
	case obj.GetLabels()[v1alpha1.SyncLabel] != owner:
		return false, nil
	case dryRun:
		return true, nil
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": syncLabelPointer, "value": owner},
		{"op": "remove", "path": syncLabelPointer},
	})
	if err != nil {
		return false, err
	}
	err = c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// summary is the event message of a cleanup that finished.
func (c cleanup) summary() string {
	var b strings.Builder
	if c.dryRun {
		b.WriteString("dry run, nothing written: ")
	}
	fmt.Fprintf(&b, "Sync deleted (deletionPolicy %s", c.policy)
	if c.suspended {
		b.WriteString(": it was suspended, so its objects are orphaned whatever spec.deletionPolicy says")
	}
	b.WriteString(")")
	if done := c.done(); done != "" {
		b.WriteString("; " + done)
	} else {
		fmt.Fprintf(&b, "; no object carried its %s label", v1alpha1.SyncLabel)
	}
	return b.String()
}

// done says what the cleanup deleted and unlabelled, or would have.
func (c cleanup) done() string {
	var parts []string
	if len(c.deleted) > 0 {
		verb := "deleted"
		if c.dryRun {
			verb = "would have deleted"
		}
		parts = append(parts, fmt.Sprintf("%s %s: %s", verb, objects(len(c.deleted)), names(c.deleted)))
	}
	if len(c.orphaned) > 0 {
		verb, rest := "removed the "+v1alpha1.SyncLabel+" label from", "which stay"
		if c.dryRun {
			verb, rest = "would have removed the "+v1alpha1.SyncLabel+" label from", "which keep it"
		}
		if c.policy == v1alpha1.DeletionDelete {
			rest += " (" + v1alpha1.PruneAnnotation + ": " + v1alpha1.Disabled + ")"
		}
		parts = append(parts, fmt.Sprintf("%s %s, %s: %s", verb, objects(len(c.orphaned)), rest, names(c.orphaned)))
	}
	return strings.Join(parts, "; ")
}

// failures says what could not be cleaned up and why.
func (c cleanup) failures() string {
	verb := "unlabelled"
	if c.policy == v1alpha1.DeletionDelete {
		verb = "deleted"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "deletionPolicy %s: %s could not be %s: ", c.policy, objects(len(c.failed)), verb)
	for i, f := range c.failed {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", f.id, f.err)
	}
	return b.String()
}

// leftBehind names the objects a cleanup gave up on, and their state.
func (c cleanup) leftBehind() string {
	var b strings.Builder
	b.WriteString(objects(len(c.failed)))
	b.WriteString(": ")
	for i, f := range c.failed {
		if i > 0 {
			b.WriteString("; ")
		}
		state := "still labelled " + v1alpha1.SyncLabel
		if f.unlabelled {
			state = "label removed"
		}
		fmt.Fprintf(&b, "%s (%s): %v", f.id, state, f.err)
	}
	return b.String()
}

// maxNames bounds the objects an event names.
const maxNames = 10

// names lists ids for people, the first maxNames of them.
func names(ids []plan.ID) string {
	var parts []string
	for i, id := range ids {
		if i == maxNames {
			parts = append(parts, fmt.Sprintf("… and %d more", len(ids)-maxNames))
			break
		}
		parts = append(parts, id.String())
	}
	return strings.Join(parts, ", ")
}

func objects(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}
