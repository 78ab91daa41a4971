package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/plan"
)

// Health is the kstatus verdict on one object.
type Health struct {
	ID     plan.ID
	Origin string
	// Status is kstatus's: Current, InProgress, Failed, Terminating,
	// NotFound or Unknown.
	Status  status.Status
	Message string
}

func (h Health) String() string {
	s := fmt.Sprintf("%s is %s", h.ID, h.Status)
	if h.Message != "" {
		s += ": " + h.Message
	}
	if h.Origin != "" {
		s += " (" + h.Origin + ")"
	}
	return s
}

// UnhealthyError lists the objects that were not healthy when the wait
// ended.
type UnhealthyError struct {
	Unhealthy []Health
	// Cause is why the wait ended: a timeout, or a Failed object.
	Cause error
}

func (e *UnhealthyError) Error() string {
	parts := make([]string, len(e.Unhealthy))
	for i, h := range e.Unhealthy {
		parts[i] = h.String()
	}
	return fmt.Sprintf("%v; %d object(s) not healthy: %s", e.Cause, len(e.Unhealthy), strings.Join(parts, "; "))
}

func (e *UnhealthyError) Unwrap() error { return e.Cause }

// ErrHealthTimeout is the Cause of an UnhealthyError when time ran out.
var ErrHealthTimeout = errors.New("health check timed out")

// waitHealthy polls the objects of steps until every one is Current by
// kstatus's rules (a Deployment is rolled out and available, a Job has
// succeeded, objects without status are Current once they exist), one of
// them Failed, timeout passed, or ctx ended. progress, when set, is told
// how many are healthy after each poll.
func (m *Manager) waitHealthy(ctx context.Context, steps []plan.Step, timeout time.Duration, progress func(healthy, total int)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending := append([]plan.Step(nil), steps...)
	var last []Health
	// read is each object's last verdict from a successful read: a read
	// that fails as time runs out (the client's rate limiter refuses a
	// request it cannot send before the deadline) must not hide it.
	read := map[plan.ID]Health{}
	for {
		healths := m.health(ctx, pending)
		var still []plan.Step
		last = last[:0]
		var failed bool
		for i, h := range healths {
			if h.Status != status.UnknownStatus {
				read[h.ID] = h
			}
			if h.Status == status.CurrentStatus {
				continue
			}
			failed = failed || h.Status == status.FailedStatus
			still = append(still, pending[i])
			last = append(last, h)
		}
		pending = still
		if progress != nil {
			progress(len(steps)-len(pending), len(steps))
		}
		switch {
		case len(pending) == 0:
			return nil
		case failed:
			return &UnhealthyError{Unhealthy: last, Cause: errors.New("an object failed")}
		}
		select {
		case <-ctx.Done():
			cause := ctx.Err()
			if errors.Is(cause, context.DeadlineExceeded) {
				cause = fmt.Errorf("%w after %s", ErrHealthTimeout, timeout)
			}
			for i, h := range last {
				if r, ok := read[h.ID]; ok && h.Status == status.UnknownStatus {
					last[i] = r
				}
			}
			return &UnhealthyError{Unhealthy: last, Cause: cause}
		case <-time.After(time.Second):
		}
	}
}

func (m *Manager) health(ctx context.Context, steps []plan.Step) []Health {
	return byRank(ctx, m, steps, func(plan.Step) plan.Rank { return 0 }, m.healthOf)
}

// waitWave waits until the objects of w are healthy, through
// Options.Wait.Around when set, reporting progress.
func (m *Manager) waitWave(ctx context.Context, w Wave) error {
	o := m.opts.Wait
	wait := func(ctx context.Context) error {
		timeout := o.Timeout
		if timeout <= 0 {
			timeout = time.Hour
			if deadline, ok := ctx.Deadline(); ok {
				timeout = time.Until(deadline)
			}
		}
		last := 0 // Progress was told 0 when the wait began
		return m.waitHealthy(ctx, w.Steps, timeout, func(healthy, _ int) {
			if o.Progress != nil && healthy != last {
				last = healthy
				o.Progress(WaveProgress{Wave: w, Healthy: healthy})
			}
		})
	}
	if o.Progress != nil {
		o.Progress(WaveProgress{Wave: w})
	}
	if o.Around != nil {
		return o.Around(ctx, w, wait)
	}
	return wait(ctx)
}

func (m *Manager) healthOf(ctx context.Context, s plan.Step) Health {
	h := Health{ID: s.ID, Origin: s.Object.Origin.String()}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.Object.Object.GroupVersionKind())
	err := m.client.Get(ctx, client.ObjectKeyFromObject(s.Object.Object), u)
	switch {
	case apierrors.IsNotFound(err):
		h.Status, h.Message = status.NotFoundStatus, "not found"
		return h
	case err != nil:
		h.Status, h.Message = status.UnknownStatus, err.Error()
		return h
	}
	h.Status, h.Message = HealthWith(ctx, m.opts.Wait.Checks, u)
	return h
}

// jobHealth is Current once the Job is Complete, Failed once it failed.
func jobHealth(u *unstructured.Unstructured) (status.Status, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["status"] != "True" {
			continue
		}
		switch cm["type"] {
		case "Complete":
			return status.CurrentStatus, "Job succeeded"
		case "Failed":
			msg, _ := cm["message"].(string)
			return status.FailedStatus, "Job failed: " + msg
		}
	}
	return status.InProgressStatus, "Job has not succeeded yet"
}
