package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/redact"
	"github.com/driftless/driftless/internal/render"
)

// syncBusyRetry is how soon a drift check that found a sync of its Sync
// writing looks again.
const syncBusyRetry = 250 * time.Millisecond

// maxDriftFields bounds the fields an incident records, so that a Sync's
// status stays small whatever was edited.
const maxDriftFields = 10

// driftFields attributes what differs between desired, applied and live
// (drift.Attribute), with the values of secrets masked, and at most
// maxDriftFields of them, the last saying how many more there were.
func driftFields(desired, applied, live *unstructured.Unstructured, manager string, secrets *redact.Set) []drift.FieldChange {
	fields := drift.Attribute(desired, applied, live, manager)
	for i := range fields {
		fields[i].Git, fields[i].Found = secrets.String(fields[i].Git), secrets.String(fields[i].Found)
	}
	if len(fields) > maxDriftFields {
		more := len(fields) - maxDriftFields
		fields = append(fields[:maxDriftFields:maxDriftFields], drift.FieldChange{Path: fmt.Sprintf("… and %d more fields", more), Git: "…", Found: "…"})
	}
	return fields
}

// DriftReconciler checks one managed object that someone else changed
// and puts it back to git, or reports it when the Sync only reports.
type DriftReconciler struct {
	Client client.Client
	// Applier reverts as the agent; Identities, when set, gives each
	// Sync's reverts the identity its syncs use (SyncReconciler).
	Applier    client.Client
	Identities *Identities
	// Clusters are the remote clusters of Syncs with spec.kubeConfig
	// (SyncReconciler.Clusters); their watches' requests are checked
	// there.
	Clusters *Clusters
	// Watches are the agent's own cluster's drift watches
	// (SetupDriftWithManager sets them): a check reads the watched
	// object's metadata from their cache, and only while they watch its
	// kind; nil reads it with Client.
	Watches  *Watches
	Recorder EventRecorder
	// Reader reads Syncs from the API server for status updates.
	Reader client.Reader
	// Store holds what each Sync last applied; the Sync reconciler
	// writes it.
	Store *Store
	// DryRun makes every Sync report drift without reverting it
	// (driftless agent --dry-run).
	DryRun  bool
	Policy  drift.Policy
	History *drift.History
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (r *DriftReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile checks the object of req. It never costs a full sync. It
// reads as load (the Sync, whether its object is to be checked now),
// decide (revert, report, or pause a fight), act (apply the object as
// git has it, or dry-run it) and record (incident, events, history).
func (r *DriftReconciler) Reconcile(ctx context.Context, req drift.Request) (ctrl.Result, error) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("sync", req.Sync, "object", req.ID().String()))
	var s v1alpha1.Sync
	if err := r.Client.Get(ctx, req.Sync, &s); err != nil {
		// A Sync that is gone is forgotten by the Sync reconciler
		// (Store.Forget), its incident writer with the rest.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	id, idErr, checkNow, err := r.admit(ctx, &s, req)
	if !checkNow {
		return ctrl.Result{}, err
	}
	check, ok := r.Store.BeginCheck(req.Sync)
	if !ok {
		// A sync of this Sync is writing: it may change or prune this
		// very object. Look again once it is done, against what it wrote;
		// the sync itself compares it too.
		r.Store.MarkToCheck(req.Sync, req.ID())
		return ctrl.Result{RequeueAfter: syncBusyRetry}, nil
	}
	release := sync.OnceFunc(check.Release)
	defer release()
	c, ok := r.decide(&s, req, check)
	if !ok {
		return ctrl.Result{}, nil
	}
	if idErr != nil {
		return ctrl.Result{}, nil // the Sync is stalled and says why
	}
	change, secrets, err := r.revert(ctx, c, id.client, check, release)
	if err != nil {
		return r.failed(ctx, c, err)
	}
	if change.Action != apply.Created && change.Action != apply.Configured {
		// Equal to git: not drift (or opted out). Incidents a failed
		// write left are written now.
		return ctrl.Result{}, r.recordIncident(ctx, &s)
	}
	return r.record(ctx, c, change, secrets)
}

// admit says whether the object of req is to be checked now, and as
// whom (the identity of s, or the error that stalls s). The watch that
// saw the change is the agent's; the comparison and the revert are the
// Sync's own, as its identity, in the cluster the Sync applies to. An
// object not checked now is left to the next sync of s where that sync
// is to compare it; an error (the incidents a failed write left could not
// be written) retries the request.
func (r *DriftReconciler) admit(ctx context.Context, s *v1alpha1.Sync, req drift.Request) (id identity, idErr error, checkNow bool, err error) {
	syncKey := req.Sync
	if err := r.flushIncidents(ctx, s); err != nil {
		// The check cannot go on: the next sync compares the object
		// whatever it would skip, and the request is retried.
		r.Store.MarkToCheck(syncKey, req.ID())
		return identity{}, nil, false, err
	}
	live, id, here, idErr := r.driftTarget(s, req.Cluster)
	if !here {
		// Seen in a cluster the Sync does not apply to (any more), or
		// before its cluster was built here: the next sync compares it.
		if req.Cluster == clusterKey(s) {
			r.Store.MarkToCheck(syncKey, req.ID())
		}
		return identity{}, nil, false, nil
	}
	if r.ownEcho(ctx, live, req) {
		// The object is as the agent's own last write left it: nothing
		// to compare, now or at the next sync. An earlier look at this
		// very write (its event can arrive before the write's answer
		// is recorded, while the sync still holds the gate) may have
		// left it to the next sync; that is settled too, or every
		// object a first sync created would be read and dry-run again
		// by the sync of the next revision.
		r.Store.Checked(syncKey, req.ID())
		return identity{}, nil, false, nil
	}
	if s.Spec.Suspend {
		// Not acted on now, not forgotten: the sync that follows the
		// resume compares it, and every other object.
		r.Store.MarkToCheck(syncKey, req.ID())
		r.Store.SetCompareAll(syncKey)
		return identity{}, nil, false, nil
	}
	return id, idErr, true, nil
}

// driftCheck is one drift check of one object, as decide left it for
// revert, failed and record.
type driftCheck struct {
	sync *v1alpha1.Sync
	req  drift.Request
	// obj is what the Sync last applied the object as; step applies it
	// again.
	obj  render.Object
	step plan.Step
	// report is true when a drift is only reported (the agent's or the
	// Sync's dry run, selfHeal off); decision is the fight policy's when
	// it is not.
	report   bool
	decision drift.Decision
	// key names the object in History.
	key  string
	opts apply.Options
}

// decide finds what s last applied the object of req as (false when s
// does not manage it, or no sync of s has run in this process yet) and
// whether a drift of it is put back now: reported only, paused by a
// fight (drift.Policy), or reverted. The apply options it leaves dry-run
// the object unless it is reverted. A drift that is only reported is
// left to the first sync that writes again.
func (r *DriftReconciler) decide(s *v1alpha1.Sync, req drift.Request, check *Checker) (*driftCheck, bool) {
	syncKey := req.Sync
	obj, ok := check.Desired(s.UID, req.ID())
	if !ok {
		if !check.Synced(s.UID) {
			// No sync of this Sync has run in this process yet (a new
			// leader, a restart): the first one compares the object.
			r.Store.MarkToCheck(syncKey, req.ID())
		}
		// Not desired (any more), or pruned by the agent itself: the next
		// sync prunes or ignores it.
		return nil, false
	}
	c := &driftCheck{sync: s, req: req, obj: obj,
		step: plan.Step{ID: req.ID(), Rank: plan.RankOf(req.ID()), Version: obj.GVK.Version, Object: obj}}
	c.report = r.DryRun || s.DryRun() || !s.SelfHealEnabled()
	if c.report {
		// Reported, not put back: the first sync that writes again (a
		// switch to Apply, selfHeal on, a new revision) compares it.
		r.Store.MarkToCheck(syncKey, req.ID())
		r.Store.SetCompareAll(syncKey)
	}
	c.key = req.Sync.String() + "/" + req.ID().String()
	c.decision = drift.Decision{Revert: true}
	if !c.report {
		c.decision = r.Policy.Decide(r.now(), r.History.Times(c.key, r.now()))
	}
	c.opts = apply.DefaultOptions(s.LabelValue())
	c.opts.DryRun = c.report || !c.decision.Revert
	return c, true
}

// revert applies the object of c as git has it, as applier (a dry run
// unless c decided to revert), and ends the check (release) once it has
// written: what it wrote is the agent's own (Store.Writes). It returns
// the change and the Secret-derived values of the last render, for
// masking what is reported; its error is masked already. An object not
// compared, or not put back, is left to the next sync.
func (r *DriftReconciler) revert(ctx context.Context, c *driftCheck, applier client.Client, check *Checker, release func()) (apply.Change, *redact.Set, error) {
	syncKey := c.req.Sync
	c.opts.Written = func(obj *metav1.PartialObjectMetadata) { r.Store.Writes().Wrote(obj.UID, obj.ResourceVersion) }
	change, err := apply.NewManager(applier, c.opts).ApplyOne(ctx, c.step)
	secrets := check.Secrets()
	release()
	if err == nil && !c.opts.DryRun {
		r.Store.Checked(syncKey, c.req.ID()) // compared, and put back if it differed
	}
	if err != nil {
		// Not compared, or not put back: the next sync compares it.
		r.Store.MarkToCheck(syncKey, c.req.ID())
	}
	// The API server may quote the object's values, some of them from a
	// Secret.
	return change, secrets, secrets.Error(err)
}

// failed tells of a check whose apply failed: an object another Sync
// owns is not this Sync's to revert (an event), one the Sync's identity
// may not write is a drift reported (an incident), and any other error is
// returned, so that the check is retried.
func (r *DriftReconciler) failed(ctx context.Context, c *driftCheck, err error) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var conflict *apply.ConflictError
	if errors.As(err, &conflict) {
		// Relabelled for another Sync: not this Sync's to revert. Its
		// next sync reports the conflict.
		logger.Info("drift check found the object owned by another Sync", "error", err.Error())
		r.Recorder.Eventf(c.sync, nil, corev1.EventTypeWarning, v1alpha1.ReasonConflict, "Revert", "%s", truncate(err.Error()))
		return ctrl.Result{}, nil
	}
	var forbidden *ForbiddenError
	if errors.As(err, &forbidden) {
		// The Sync's identity may not put it back: say so on the Sync
		// (Drifted) instead of retrying what only a grant can fix.
		logger.Info("drift not reverted: permission denied", "error", err.Error())
		r.Recorder.Eventf(c.sync, nil, corev1.EventTypeWarning, v1alpha1.ReasonDriftDetected, "Revert", "%s: not reverted: %s", c.step.ID, truncate(forbidden.Error()))
		inc := v1alpha1.DriftIncident{Time: metav1.NewTime(r.now()), Object: c.step.ID.String(), Origin: c.obj.Origin.Path,
			Action: v1alpha1.DriftReported, Message: truncate("not reverted: " + forbidden.Error())}
		return ctrl.Result{}, r.recordIncident(ctx, c.sync, inc)
	}
	logger.Error(err, "drift check failed")
	r.Recorder.Eventf(c.sync, nil, corev1.EventTypeWarning, v1alpha1.ReasonApplyFailed, "Revert", "%s", truncate(err.Error()))
	return ctrl.Result{}, err
}

// record tells of a drift the check found (change): which fields differ
// (masked with secrets), the incident on the Sync's status, the metrics,
// the revert or the pause in History, and the events. A paused fight
// looks again when its pause ends.
func (r *DriftReconciler) record(ctx context.Context, c *driftCheck, change apply.Change, secrets *redact.Set) (ctrl.Result, error) {
	action := v1alpha1.DriftReverted
	switch {
	case c.report:
		action = v1alpha1.DriftReported
	case !c.decision.Revert:
		action = v1alpha1.DriftPaused
	}
	var fields []drift.FieldChange
	if desired, err := c.obj.Decode(); err == nil {
		fields = driftFields(desired, change.Applied, change.Live, c.opts.FieldManager, secrets)
	}
	incident := incidentOf(r.now(), c.step, c.obj.Origin.Path, action, change, fields, c.decision.Reason)
	observe(c.req.Sync.String(), action, c.req.GVK.Kind, fields, r.now())
	onSync := true
	switch action {
	case v1alpha1.DriftReverted:
		r.History.Record(c.key, r.now())
	case v1alpha1.DriftPaused:
		// One fight is one event on the Sync (and one notification):
		// an edit during its pause is recorded and told on the object.
		onSync = r.History.Pause(c.key, r.now(), r.now().Add(c.decision.RetryAfter))
	}
	log.FromContext(ctx).Info("drift", "action", action, "fields", len(fields), "message", incident.Message)
	r.announce(c.sync, c.req, c.step.ID, change, action, incident.Message, onSync)
	if err := r.recordIncident(ctx, c.sync, incident); err != nil {
		return ctrl.Result{}, err
	}
	if action == v1alpha1.DriftPaused {
		return ctrl.Result{RequeueAfter: c.decision.RetryAfter}, nil
	}
	return ctrl.Result{}, nil
}

// announce records the event of a drift on the object (in the agent's
// own cluster) and, when onSync, on the Sync, which is what notifications
// are sent from.
func (r *DriftReconciler) announce(s *v1alpha1.Sync, req drift.Request, id plan.ID, change apply.Change, action v1alpha1.DriftAction, message string, onSync bool) {
	eventType, reason := corev1.EventTypeWarning, v1alpha1.ReasonDriftDetected
	switch action {
	case v1alpha1.DriftReverted:
		eventType, reason = corev1.EventTypeNormal, v1alpha1.ReasonDriftReverted
	case v1alpha1.DriftPaused:
		reason = v1alpha1.ReasonFight
	}
	regarding := change.Live
	if regarding == nil {
		regarding = change.Applied
	}
	if regarding != nil && req.Cluster == "" {
		// (An object of a remote cluster has no place for an Event here:
		// the Sync's says it.)
		r.Recorder.Eventf(regarding, nil, eventType, reason, "Revert", "%s", message)
	}
	if onSync {
		r.Recorder.Eventf(s, nil, eventType, reason, "Revert", "%s: %s", id, message)
	}
}

// ownEcho reports whether the object of req, as the watch last saw it,
// is as the agent's own last write left it: a check queued for the echo
// of that write (its watch event may come before the write's answer is
// recorded) then costs no request. Any doubt (the object gone, a read
// that fails) is no.
func (r *DriftReconciler) ownEcho(ctx context.Context, live client.Reader, req drift.Request) bool {
	return leftAsWritten(ctx, live, r.Store.Writes(), req.GVK, client.ObjectKey{Namespace: req.Namespace, Name: req.Name})
}

// leftAsWritten reports whether the object key of kind gvk, as live
// reads its metadata, has the resourceVersion the agent's own last write
// of it returned (writes): nobody has changed it since. Any doubt (the
// object gone, a read that fails) is no.
func leftAsWritten(ctx context.Context, live client.Reader, writes *drift.Writes, gvk schema.GroupVersionKind, key client.ObjectKey) bool {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := live.Get(ctx, key, m); err != nil {
		return false
	}
	return writes.Ours(m.UID, m.ResourceVersion)
}

// incidentOf words a drift for people: what was put back (or would be),
// who had changed it, and where to change it properly. Every value is
// bounded (drift.BoundValue), in the fields and in the message.
func incidentOf(now time.Time, step plan.Step, originPath string, action v1alpha1.DriftAction, change apply.Change,
	fields []drift.FieldChange, pauseReason string) v1alpha1.DriftIncident {
	verb := map[v1alpha1.DriftAction]string{
		v1alpha1.DriftReverted: "reverted",
		v1alpha1.DriftReported: "drift (not reverted: dry run or selfHeal off)",
		v1alpha1.DriftPaused:   "drift (not reverted)",
	}[action]
	bounded := make([]drift.FieldChange, len(fields))
	for i, f := range fields {
		bounded[i] = f.Bound()
	}
	fields = bounded
	var parts []string
	if change.Action == apply.Created {
		parts = append(parts, "the object was deleted; "+map[bool]string{true: "re-created it", false: "it would be re-created"}[action == v1alpha1.DriftReverted])
	}
	for _, f := range fields {
		parts = append(parts, f.String())
	}
	if len(parts) == 0 {
		parts = append(parts, "fields git sets were changed")
	}
	msg := verb + " " + strings.Join(parts, "; ")
	if pauseReason != "" {
		msg += "; " + pauseReason
	}
	if originPath != "" {
		msg += "; change it in git: " + originPath
	}
	inc := v1alpha1.DriftIncident{
		Time:    metav1.NewTime(now),
		Object:  step.ID.String(),
		Origin:  originPath,
		Action:  action,
		Message: truncate(msg),
	}
	for _, f := range fields {
		df := v1alpha1.DriftField{Path: f.Path, Git: f.Git, Found: f.Found, Manager: f.Manager}
		if !f.At.IsZero() {
			t := metav1.NewTime(f.At)
			df.ChangedAt = &t
		}
		inc.Fields = append(inc.Fields, df)
	}
	return drift.BoundIncident(inc)
}

// recordIncident adds incs to the Sync's status.drift and sets the
// Drifted condition when the drift stays, dropping the oldest incidents
// and sync records beyond drift.StatusBudget; with no incs it writes those
// a failed write left.
//
// A revert never waits for another's incident: incidents of one Sync are
// queued, and the call that finds no write of that Sync's incidents
// running writes the queue, in as few patches as it takes (every
// incident queued meanwhile goes into the next one), while the others
// return at once. When a write fails its incidents stay queued for the
// next call, and the error is returned to the caller that wrote.
//
// Each write is a merge patch of only the fields it changes, on the
// status subresource, with a resourceVersion as an optimistic lock, and
// it reads back only the Sync's metadata; the Sync's status does not hold
// its inventory (that is its Inventory's), so the write costs the API
// server the same whatever the Sync manages. Each write starts from the
// status the previous one left (or, for the first, s as the check read it
// from the cache), so that a burst does not wait for the cache to see
// each write. A sync that wrote the status in between makes the patch
// conflict; it then reads the Sync from the API server and tries again,
// with all of retry.DefaultRetry's attempts (the try from the status the
// previous write left is not one). The writer is the Store's, and goes
// with the rest of the Sync's state (Store.Forget).
func (r *DriftReconciler) recordIncident(ctx context.Context, s *v1alpha1.Sync, incs ...v1alpha1.DriftIncident) error {
	w := r.Store.incidentWriter(client.ObjectKeyFromObject(s))
	w.mu.Lock()
	w.pending = append(w.pending, incs...)
	if w.writing {
		w.mu.Unlock()
		return nil // the running write takes them
	}
	w.writing = true
	var batch []v1alpha1.DriftIncident
	done := false
	defer func() {
		if !done {
			// A failed write, or a panic in one: the batch goes back to
			// the queue, and the next reconcile of the Sync's objects
			// writes it (flushIncidents).
			w.mu.Lock()
			w.pending = append(batch, w.pending...)
			w.writing = false
			w.mu.Unlock()
		}
	}()
	for len(w.pending) > 0 {
		batch = w.pending
		w.pending = nil
		w.mu.Unlock()
		if err := r.writeIncidents(ctx, w, s, batch); err != nil {
			return err
		}
		batch = nil
		w.mu.Lock()
	}
	w.writing = false
	done = true
	w.mu.Unlock()
	return nil
}

// flushIncidents writes the incidents a failed write left queued, before
// a drift check of s goes on: whatever that check does next (an early
// return for an object no longer desired, a suspended Sync, a conflict),
// they go with the next write. An error is returned, so that the request
// is retried and the queue with it.
func (r *DriftReconciler) flushIncidents(ctx context.Context, s *v1alpha1.Sync) error {
	w := r.Store.incidentWriter(client.ObjectKeyFromObject(s))
	w.mu.Lock()
	left := len(w.pending) > 0 && !w.writing
	w.mu.Unlock()
	if !left {
		return nil
	}
	return r.recordIncident(ctx, s)
}

// writeIncidents writes incs, oldest first, in one patch; only the caller
// that set w.writing calls it.
func (r *DriftReconciler) writeIncidents(ctx context.Context, w *incidentWriter, s *v1alpha1.Sync, incs []v1alpha1.DriftIncident) error {
	key := client.ObjectKeyFromObject(s)
	last := w.last
	w.last = nil // set again once a write succeeds
	write := func(cur *v1alpha1.Sync) error {
		next, body, err := incidentPatch(cur, incs...)
		if err != nil {
			return err
		}
		target := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Sync"},
			ObjectMeta: metav1.ObjectMeta{Namespace: cur.Namespace, Name: cur.Name}}
		if err := r.Client.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
			return client.IgnoreNotFound(err)
		}
		// The status is now what the patch made of cur's.
		w.last = &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: cur.Namespace, Name: cur.Name, UID: cur.UID,
			Generation: cur.Generation, ResourceVersion: target.ResourceVersion}, Status: next}
		return nil
	}
	// The status the last write left is tried first, and does not count
	// against the retries: a sync that wrote the status since makes it
	// conflict, which says only that it is stale.
	fresh := false
	if last != nil && last.UID == s.UID {
		if err := write(last); !apierrors.IsConflict(err) {
			return err
		}
		fresh = true
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := s
		if fresh {
			var got v1alpha1.Sync
			if err := r.Reader.Get(ctx, key, &got); err != nil {
				return client.IgnoreNotFound(err)
			}
			cur = &got
		}
		fresh = true
		return write(cur)
	})
}

// incidentWriter queues and writes one Sync's incidents.
type incidentWriter struct {
	mu sync.Mutex
	// pending are the incidents not written yet, oldest first; writing
	// says that a call of recordIncident is writing them. Guarded by mu.
	pending []v1alpha1.DriftIncident
	writing bool
	// last is the Sync as the last incident write left it: its
	// resourceVersion then, and its status. Nil before the first write
	// and after a failed one. Only the writing call uses it.
	last *v1alpha1.Sync
}

// incidentPatch is the JSON merge patch that records incs (oldest first)
// in s's status: status.drift with the newest first, the conditions and
// the sync history when they change, and s's resourceVersion as an
// optimistic lock. Its size is bounded by drift.StatusBudget whatever the
// Sync manages. next is s's status once patched (without a legacy
// status.inventory, which the patch leaves as it is).
func incidentPatch(s *v1alpha1.Sync, incs ...v1alpha1.DriftIncident) (next v1alpha1.SyncStatus, patch []byte, err error) {
	// The status without its inventory, with slices of its own: nothing
	// here writes into s, which may be shared.
	st := v1alpha1.SyncStatus{
		Conditions: slices.Clone(s.Status.Conditions),
		History:    slices.Clone(s.Status.History),
		Drift:      slices.Clone(s.Status.Drift),
	}
	for _, inc := range incs {
		st.Drift = append([]v1alpha1.DriftIncident{inc}, st.Drift...)
		if inc.Action != v1alpha1.DriftReverted {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionTrue, ObservedGeneration: s.Generation,
				Reason: v1alpha1.ReasonDriftDetected, Message: inc.Object + ": " + inc.Message,
			})
		} else if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDrifted); c != nil &&
			c.Status == metav1.ConditionTrue && strings.HasPrefix(c.Message, inc.Object+": ") {
			// The object that was left drifted is back to git.
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, ObservedGeneration: s.Generation,
				Reason: v1alpha1.ReasonInSync, Message: inc.Object + " is back to git",
			})
		}
	}
	if len(st.Drift) > v1alpha1.MaxDrift {
		st.Drift = st.Drift[:v1alpha1.MaxDrift]
	}
	// Older incidents and records go first, so that this write and
	// later ones stay within etcd's request limit.
	drift.FitStatus(&st, drift.StatusBudget)

	// A merge patch replaces a list whole: each list is sent in full or
	// not at all.
	type statusFields struct {
		Conditions []metav1.Condition       `json:"conditions,omitempty"`
		History    []v1alpha1.SyncRecord    `json:"history,omitempty"`
		Drift      []v1alpha1.DriftIncident `json:"drift"`
	}
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status statusFields `json:"status"`
	}
	body.Metadata.ResourceVersion = s.ResourceVersion
	body.Status.Drift = st.Drift
	if !equality.Semantic.DeepEqual(st.Conditions, s.Status.Conditions) {
		body.Status.Conditions = st.Conditions
	}
	if !equality.Semantic.DeepEqual(st.History, s.Status.History) {
		body.Status.History = st.History
	}
	patch, err = json.Marshal(body)
	return st, patch, err
}
