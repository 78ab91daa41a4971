package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/source"
)

// errSuperseded ends a health wait when a new revision arrives.
var errSuperseded = errors.New("a new revision arrived during the health wait")

// revisionPoll is how often a health wait asks git for a new revision.
var revisionPoll = 3 * time.Second

// untilSuperseded runs wait with a context that ends when git moves on
// from revision (errSuperseded), so that a fix pushed for a failing
// rollout is applied at once rather than after the timeout. It asks
// through the mirror's shared resolve, taking any answer younger than
// revisionPoll: however many Syncs of a repository wait, their waits
// cost one ls-remote per revisionPoll in total.
func untilSuperseded(ctx context.Context, mirror *source.Mirror, req source.Request, revision string, wait func(context.Context) error) error {
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		for {
			select {
			case <-waitCtx.Done():
				return
			case <-time.After(revisionPoll):
			}
			rev, err := mirror.ResolveSince(waitCtx, req, time.Now().Add(-revisionPoll))
			if err == nil && rev != revision {
				cancel(fmt.Errorf("%w (%s)", errSuperseded, source.Short(rev)))
				return
			}
		}
	}()
	err := wait(waitCtx)
	if cause := context.Cause(waitCtx); errors.Is(cause, errSuperseded) {
		return cause
	}
	return err
}

// progressOf is the status.progress of a wait for a wave of a sync of
// revision that applies total objects.
func progressOf(revision string, p apply.WaveProgress, total int) v1alpha1.SyncProgress {
	applied := 0
	for _, c := range p.Wave.SoFar {
		if c.Action != apply.Skipped {
			applied++
		}
	}
	return v1alpha1.SyncProgress{Revision: revision, Wave: p.Wave.Number, Index: p.Wave.Index + 1, Waves: p.Wave.Count,
		Applied: applied, Healthy: p.Healthy, Total: total}
}

// writeProgress patches status.progress and a Reconciling=True condition
// saying which wave the sync is at.
//
// The patch sends the whole conditions list, so it is locked on s's
// resourceVersion: a drift incident recorded meanwhile (the gate is open
// during a health wait) makes it conflict, and it is made again from the
// status read back, keeping the incident's Drifted condition. s then
// holds the status as written, so that the next wave's write and the
// sync's last one start from it; its spec and generation stay those the
// sync applies. Progress is only informative: an error other than a
// conflict is logged and the sync goes on.
func (r *SyncReconciler) writeProgress(ctx context.Context, s *v1alpha1.Sync, p v1alpha1.SyncProgress, waveSize int) {
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			var fresh v1alpha1.Sync
			if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(s), &fresh); err != nil {
				return err
			}
			s.ResourceVersion, s.Status = fresh.ResourceVersion, fresh.Status
		}
		first = false
		cur := s.DeepCopy()
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		cur.Status.Progress = &p
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, ObservedGeneration: s.Generation,
			Reason: v1alpha1.ReasonProgressing,
			Message: fmt.Sprintf("applying %s: wave %d of %d (driftless.dev/wave %d): %d of %d objects healthy; %d applied so far of %d",
				source.Short(p.Revision), p.Index, p.Waves, p.Wave, p.Healthy, waveSize, p.Applied, p.Total),
		})
		if err := r.Client.Status().Patch(ctx, cur, patch); err != nil {
			return err
		}
		s.ResourceVersion, s.Status = cur.ResourceVersion, cur.Status
		return nil
	})
	if err != nil {
		log.FromContext(ctx).V(1).Info("could not record progress", "error", err.Error())
	}
}
