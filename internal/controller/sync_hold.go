package controller

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// held is the hold a sync applied: the Sync's Hold, the tip of its branch
// and how many commits the held revision is behind it.
type held struct {
	v1alpha1.Hold
	tip     string
	pending int
}

// HoldVerifier checks the stamp the agent's admission webhook puts on the
// holds it sees written (admission.Server).
type HoldVerifier interface {
	VerifyHold(namespace, name string, h v1alpha1.Hold) bool
}

// holdRefusedError is a hold the agent will not apply; the sync stalls
// until the hold or the branch changes.
type holdRefusedError struct{ err error }

func (e *holdRefusedError) Error() string { return e.err.Error() }
func (e *holdRefusedError) Unwrap() error { return e.err }

// heldRevision returns the revision a sync of s applies: tip, the
// revision its branch points to, or the revision of its hold
// (v1alpha1.HoldAnnotation) with the hold. A hold must name a commit of
// the branch's history that passes spec.source.git.verify; otherwise the
// error is a *holdRefusedError saying what and how to release the hold.
// Other errors (the mirror could not fetch) are fetch failures.
func (r *SyncReconciler) heldRevision(ctx context.Context, s *v1alpha1.Sync, req source.Request, tip string) (string, *held, error) {
	h, err := v1alpha1.HoldOf(s)
	if err != nil {
		return "", nil, &holdRefusedError{fmt.Errorf("%w; hold again with `driftless hold %s/%s`, or remove the hold with `driftless release %s/%s`",
			err, s.Namespace, s.Name, s.Namespace, s.Name)}
	}
	if h == nil {
		return tip, nil, nil
	}
	h.Verified = r.HoldStamps != nil && r.HoldStamps.VerifyHold(s.Namespace, s.Name, *h)
	if req.Ref.Tag != "" || req.Ref.Commit != "" {
		return "", nil, &holdRefusedError{fmt.Errorf("held at %s %s, but the Sync follows %s, not a branch: a hold keeps a Sync at a commit of its branch; "+
			"remove it with `driftless release %s/%s`", source.Short(h.Revision), h.Who(), req.Ref, s.Namespace, s.Name)}
	}
	pending, err := r.Mirror().Behind(ctx, req, tip, h.Revision)
	var ve *source.VerificationError
	switch {
	case errors.Is(err, source.ErrNotInHistory):
		return "", nil, &holdRefusedError{fmt.Errorf("held at %s %s, which is not in the history of %s (tip %s): the agent applies only commits of the Sync's branch; "+
			"hold at one of them, or return to the branch with `driftless release %s/%s`", source.Short(h.Revision), h.Who(), req.Ref, source.Short(tip), s.Namespace, s.Name)}
	case errors.As(err, &ve):
		return "", nil, &holdRefusedError{fmt.Errorf("held at %s %s, which spec.source.git.verify refuses: %w; hold at a signed commit, "+
			"or return to the branch with `driftless release %s/%s`", source.Short(h.Revision), h.Who(), err, s.Namespace, s.Name)}
	case err != nil:
		return "", nil, err
	}
	return h.Revision, &held{Hold: *h, tip: tip, pending: pending}, nil
}

// holdFailure is the Ready reason of heldRevision's error.
func holdFailure(err error) string {
	var refused *holdRefusedError
	if errors.As(err, &refused) {
		return v1alpha1.ReasonHoldRefused
	}
	return v1alpha1.ReasonFetchFailed
}

// holdMessage says what a held Sync waits for:
// "held at abc1234 by jane: payment errors; 3 commits pending (tip def5678)"
// ("claimed by jane" when the hold carries no stamp of the agent's webhook).
func holdMessage(h *held) string {
	msg := fmt.Sprintf("held at %s %s: %s", source.Short(h.Revision), h.Who(), h.Reason)
	switch h.pending {
	case 0:
		return msg + "; no commits pending"
	case 1:
		return msg + fmt.Sprintf("; 1 commit pending (tip %s)", source.Short(h.tip))
	default:
		return msg + fmt.Sprintf("; %d commits pending (tip %s)", h.pending, source.Short(h.tip))
	}
}

// readyReason is the Ready reason of a sync that succeeded: Held when it
// applied a hold, else Succeeded.
func (o outcome) readyReason() string {
	if o.hold != nil {
		return v1alpha1.ReasonHeld
	}
	return v1alpha1.ReasonSucceeded
}

// holdStatus is status.hold after o: nil when o applied no hold.
func (o outcome) holdStatus() *v1alpha1.HoldStatus {
	if o.hold == nil {
		return nil
	}
	by := o.hold.By
	if !o.hold.Verified {
		by += " (claimed)"
	}
	return &v1alpha1.HoldStatus{Revision: o.hold.Revision, By: by, Reason: o.hold.Reason,
		Since: metav1.NewTime(o.hold.At.UTC()), Tip: o.hold.tip, Pending: o.hold.pending}
}

// holdRecorded reports whether st already says what o says of a hold:
// none, or the same hold with the same tip.
func (o outcome) holdRecorded(st *v1alpha1.SyncStatus) bool {
	h := o.holdStatus()
	if h == nil || st.Hold == nil {
		return h == nil && st.Hold == nil
	}
	return h.Revision == st.Hold.Revision && h.By == st.Hold.By && h.Reason == st.Hold.Reason &&
		h.Since.Equal(&st.Hold.Since) && h.Tip == st.Hold.Tip && h.Pending == st.Hold.Pending
}

// reportHeld tells the commit status targets that the tip of a held
// Sync's branch waits for the hold's release: its status says held, not
// pending.
func (r *SyncReconciler) reportHeld(s *v1alpha1.Sync, o outcome) {
	if r.Revisions == nil || o.hold == nil || o.err != nil || o.dryRun || r.DryRun || s.DryRun() || o.hold.tip == o.revision {
		return
	}
	r.Revisions.Held(s, o.hold.tip, holdMessage(o.hold))
}

// holdChanged passes updates that change v1alpha1.HoldAnnotation: a
// hold, or its release, is synced at once.
var holdChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld != nil && e.ObjectNew != nil &&
			e.ObjectOld.GetAnnotations()[v1alpha1.HoldAnnotation] != e.ObjectNew.GetAnnotations()[v1alpha1.HoldAnnotation]
	},
}
