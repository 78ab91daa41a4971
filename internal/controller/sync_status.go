package controller

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/source"
)

// outcome is what one sync attempt did: the input to the status update.
type outcome struct {
	revision  string
	started   time.Time
	duration  time.Duration
	changes   apply.ChangeSet
	inventory []plan.Entry // nil: keep the previous inventory
	// reason is empty on success, else the Ready=False reason.
	reason string
	err    error
	// dryRun: nothing was written; changes are what a sync would do.
	dryRun bool
	// progressed: status.progress was written during the sync.
	progressed bool
	// movedBack says the source went back to an older revision (see
	// movedBack), or is empty.
	movedBack string
	// commit is the synced commit's, once fetched.
	commit source.Commit
	// inventoryLost says the Sync's Inventory was missing when this
	// agent first read it (see missingInventory), or is empty.
	inventoryLost string
	// compared: every object of the render was read and compared with
	// the cluster (none taken as unchanged from the watches).
	compared bool
	// lastCompared is when the live objects were last compared in full:
	// started when compared, else an earlier sync's; zero when unknown.
	lastCompared time.Time
	// reverted words each drift the sync put back (revertedDrift).
	reverted []string
	// unwatched words each kind of the Sync's objects the drift watches
	// could not watch (Watches.NotWatched): their drift is put back at
	// the interval, not at once.
	unwatched []string
	// hold is the hold the sync applied (see heldRevision), or nil.
	hold *held
	// cluster is the server of the Sync's remote cluster; "" for the
	// agent's own.
	cluster string
	// clusterProxy is the proxy the agent reached cluster through; ""
	// for none.
	clusterProxy string
	// retry is how soon to try again a Sync whose cluster did not
	// answer (ClusterUnreachable); zero otherwise.
	retry time.Duration
}

// pending reports whether a dry run found anything to do.
func (o outcome) pending() bool {
	return o.changes.Count(apply.Created)+o.changes.Count(apply.Configured)+o.changes.Count(apply.Pruned) > 0
}

// sameReport reports whether a dry run found exactly what the Sync's
// status already says, so that recording it again would only churn.
func (o outcome) sameReport(st *v1alpha1.SyncStatus) bool {
	if !o.dryRun || o.err != nil || o.revision != st.LastAttemptedRevision {
		return false
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.Message == o.message()
}

// stalledReasons are failures that retrying cannot fix: they need a new
// commit or a spec change.
var stalledReasons = map[string]bool{
	v1alpha1.ReasonBuildFailed:            true,
	v1alpha1.ReasonValidationFailed:       true,
	v1alpha1.ReasonPruneRefused:           true,
	v1alpha1.ReasonInvalidSpec:            true,
	v1alpha1.ReasonDependencyCycle:        true,
	v1alpha1.ReasonServiceAccountRequired: true,
	v1alpha1.ReasonVerificationFailed:     true,
	v1alpha1.ReasonAccessDenied:           true,
	v1alpha1.ReasonHoldRefused:            true,
}

// maxMessage keeps condition and event messages within what the API
// accepts and what people read.
const maxMessage = 1000

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - 20
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " … (truncated)"
}

// message is the one-line account of an outcome.
func (o outcome) message() string {
	if o.err != nil {
		return truncate(withNote(o.err.Error(), o.inventoryLost))
	}
	if o.dryRun {
		if !o.pending() {
			return fmt.Sprintf("dry run of %s: in sync, nothing to change (%d unchanged)", source.Short(o.revision), o.changes.Count(apply.Unchanged))
		}
		return truncate(fmt.Sprintf("dry run of %s: would %s", source.Short(o.revision), o.wouldDo()))
	}
	msg := fmt.Sprintf("applied %s: %s", source.Short(o.revision), o.changes.Summary())
	if o.hold != nil {
		msg = holdMessage(o.hold) + "; " + msg
	}
	if len(o.reverted) > 0 {
		msg += fmt.Sprintf("; %d reverted: %s", len(o.reverted), strings.Join(o.reverted, "; "))
	}
	if o.movedBack != "" {
		msg += "; " + o.movedBack
	}
	if adopted := o.changes.Adopted(); len(adopted) > 0 {
		msg += "; " + adoptedMessage(adopted)
	}
	if len(o.unwatched) > 0 {
		msg += "; " + unwatchedMessage(o.unwatched)
	}
	return truncate(withNote(msg, o.inventoryLost))
}

// unwatchedMessage says which kinds of the Sync's objects are not watched
// for drift, and what that means for them.
func unwatchedMessage(kinds []string) string {
	return fmt.Sprintf("not watched for drift, so a change by hand is put back at the interval, not at once (the agent tries the watch again with a back-off up to 10 min; check the agent's RBAC and the API serving the kind): %s", strings.Join(kinds, "; "))
}

// withNote joins a note to msg, when there is one.
func withNote(msg, note string) string {
	if note == "" {
		return msg
	}
	return msg + "; " + note
}

// movedBack returns a note when revision, about to be applied, is one
// this Sync applied before the revision it applied last (status.history):
// the branch was moved back, by a force-push or a reset. The Sync follows
// it; the note tells whoever reads its status or events why the cluster
// went back. A move to an older commit never applied is not told apart
// from a new commit: that needs the git history, which a shallow fetch
// does not have.
func movedBack(s *v1alpha1.Sync, revision string) string {
	last := s.Status.LastAppliedRevision
	if last == "" || revision == last {
		return ""
	}
	for _, rec := range s.Status.History {
		if rec.Revision == revision && rec.Result == v1alpha1.ResultSucceeded {
			ref := "the source"
			if b := s.Spec.Source.Git.Branch; b != "" {
				ref = "branch " + b
			}
			return fmt.Sprintf("%s moved back from %s to %s, a revision applied before (force-push?)", ref, source.Short(last), source.Short(revision))
		}
	}
	return ""
}

// adoptedMessage names the objects a sync adopted: they existed with no
// driftless.dev/sync label (made by hand, or by Flux v1) and are the
// Sync's now, to be reverted and pruned like the rest.
func adoptedMessage(adopted apply.ChangeSet) string {
	ids := make([]plan.ID, len(adopted))
	for i, c := range adopted {
		ids[i] = c.ID
	}
	return fmt.Sprintf("adopted %d object(s) that had no %s label: %s", len(adopted), v1alpha1.SyncLabel, names(ids))
}

// wouldDo lists what a dry run would change, object by object.
func (o outcome) wouldDo() string {
	var parts []string
	verbs := map[apply.Action]string{apply.Created: "create", apply.Configured: "update", apply.Pruned: "prune"}
	for _, c := range o.changes {
		if v, ok := verbs[c.Action]; ok {
			parts = append(parts, v+" "+c.ID.String())
		}
	}
	return strings.Join(parts, ", ")
}

// noop reports whether the attempt changed nothing and found nothing new,
// so that recording it would only churn the Sync.
func (o outcome) noop(st *v1alpha1.SyncStatus) bool {
	return o.revision == st.LastAppliedRevision && o.unchangedSince(st)
}

// unchangedSince reports whether o succeeded and changed nothing, for a
// Sync that st says was in sync before: at the same revision that is a
// noop; at a new one (a commit that left the Sync's objects as they were)
// the status records the revision, but there is nothing to tell anyone.
func (o outcome) unchangedSince(st *v1alpha1.SyncStatus) bool {
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	return o.err == nil && !o.dryRun &&
		ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == o.readyReason() && o.holdRecorded(st) &&
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionStalled) &&
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDrifted) &&
		o.changes.Count(apply.Created)+o.changes.Count(apply.Configured)+o.changes.Count(apply.Pruned) == 0
}

// inSyncMessage is the Drifted=False message of a sync that applied: it
// says the cluster matches git only when this sync compared every live
// object, and otherwise what it knows — what it applied, and when the live
// objects were last compared.
func (o outcome) inSyncMessage() string {
	rev := source.Short(o.revision)
	if o.compared {
		return fmt.Sprintf("the cluster matches %s: every live object compared at %s", rev, clock(o.started))
	}
	if o.lastCompared.IsZero() {
		return fmt.Sprintf("applied %s; the live objects were not compared by this agent yet", rev)
	}
	return fmt.Sprintf("applied %s; live objects last compared at %s, changes since seen by the watches", rev, clock(o.lastCompared))
}

// clock is a time as conditions show it: UTC, to the second.
func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// setStatus records o in st for a Sync at generation.
func setStatus(st *v1alpha1.SyncStatus, generation int64, o outcome) {
	st.ObservedGeneration = generation
	st.Cluster = o.cluster
	st.ClusterProxy = o.clusterProxy
	if o.revision != "" {
		st.LastAttemptedRevision = o.revision
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: generation, Message: o.message()}
	switch {
	case o.err == nil && o.dryRun:
		// A dry run applies nothing: lastAppliedRevision stays.
		ready.Status, ready.Reason = metav1.ConditionTrue, v1alpha1.ReasonSucceeded
		drifted := metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, ObservedGeneration: generation,
			Reason: v1alpha1.ReasonInSync, Message: ready.Message}
		if o.pending() {
			drifted.Status, drifted.Reason = metav1.ConditionTrue, v1alpha1.ReasonDriftDetected
		}
		meta.SetStatusCondition(&st.Conditions, drifted)
	case o.err == nil:
		ready.Status, ready.Reason = metav1.ConditionTrue, o.readyReason()
		st.LastAppliedRevision = o.revision
		st.LastAppliedGeneration = generation
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse,
			ObservedGeneration: generation, Reason: v1alpha1.ReasonInSync, Message: o.inSyncMessage()})
	default:
		ready.Status, ready.Reason = metav1.ConditionFalse, o.reason
	}
	st.Hold = o.holdStatus()
	if o.compared && o.err == nil {
		st.LastComparedAt = &metav1.Time{Time: o.started.UTC().Truncate(time.Second)}
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, ObservedGeneration: generation,
		Reason: ready.Reason, Message: "sync finished",
	})
	if stalledReasons[o.reason] {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, ObservedGeneration: generation,
			Reason: o.reason, Message: ready.Message,
		})
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
	}
	record := v1alpha1.SyncRecord{
		Revision:   o.revision,
		StartedAt:  metav1.NewTime(o.started),
		Duration:   o.duration.Round(time.Millisecond).String(),
		Result:     v1alpha1.ResultSucceeded,
		Reason:     ready.Reason,
		Created:    o.changes.Count(apply.Created),
		Configured: o.changes.Count(apply.Configured),
		Unchanged:  o.changes.Count(apply.Unchanged),
		Pruned:     o.changes.Count(apply.Pruned),
		Adopted:    len(o.changes.Adopted()),
		Message:    ready.Message,
		Subject:    o.commit.Subject,
		Author:     o.commit.Author,
	}
	record.Changes, record.MoreChanges = recordChanges(o.changes)
	if o.err != nil {
		record.Result = v1alpha1.ResultFailed
	}
	st.History = append([]v1alpha1.SyncRecord{record}, st.History...)
	if len(st.History) > v1alpha1.MaxHistory {
		st.History = st.History[:v1alpha1.MaxHistory]
	}
	drift.FitStatus(st, drift.StatusBudget)
}
