package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
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
	unlisted := map[healthGroup]bool{}
	for {
		healths := m.health(ctx, pending, unlisted)
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

// healthGroup is the kind and namespace of objects whose health one LIST
// reads.
type healthGroup struct {
	gvk       schema.GroupVersionKind
	namespace string
}

// health reads the verdict on each of steps. Objects of one kind and
// namespace, two or more, are read with one LIST of the Owner's objects
// (label driftless.dev/sync) rather than a GET each: a wait for a wave of
// a hundred Deployments costs one request per poll, not a hundred. An
// object the LIST does not return (not labelled, or gone) is read with a
// GET; so is a group whose LIST fails, and unlisted remembers the groups
// whose LIST was refused so that later polls do not ask again (a tenant's
// account may get objects it may not list).
func (m *Manager) health(ctx context.Context, steps []plan.Step, unlisted map[healthGroup]bool) []Health {
	out := make([]Health, len(steps))
	var groups []healthGroup
	members := map[healthGroup][]int{}
	for i, s := range steps {
		g := healthGroup{gvk: s.GroupVersionKind(), namespace: s.ID.Namespace}
		if len(members[g]) == 0 {
			groups = append(groups, g)
		}
		members[g] = append(members[g], i)
	}
	var listed []healthGroup
	for _, g := range groups {
		if m.opts.Owner != "" && len(members[g]) > 1 && !unlisted[g] {
			listed = append(listed, g)
		}
	}
	type listing struct {
		live    map[string]*unstructured.Unstructured
		refused bool
	}
	lists := byRank(ctx, m, listed, func(healthGroup) plan.Rank { return 0 }, func(ctx context.Context, g healthGroup) listing {
		live, err := m.listOwned(ctx, g)
		return listing{live: live, refused: apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)}
	})
	got := make([]bool, len(steps))
	for j, g := range listed {
		if lists[j].refused {
			unlisted[g] = true
		}
		for _, i := range members[g] {
			if u, ok := lists[j].live[steps[i].ID.Name]; ok {
				out[i], got[i] = m.verdict(ctx, steps[i], u), true
			}
		}
	}
	var rest []int
	for i := range steps {
		if !got[i] {
			rest = append(rest, i)
		}
	}
	read := byRank(ctx, m, rest, func(int) plan.Rank { return 0 }, func(ctx context.Context, i int) Health { return m.healthOf(ctx, steps[i]) })
	for j, i := range rest {
		out[i] = read[j]
	}
	return out
}

// listOwned lists the objects of g that carry the Owner's label, by name.
func (m *Manager) listOwned(ctx context.Context, g healthGroup) (map[string]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(g.gvk.GroupVersion().WithKind(g.gvk.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabels{v1alpha1.SyncLabel: m.opts.Owner}}
	if g.namespace != "" {
		opts = append(opts, client.InNamespace(g.namespace))
	}
	if err := m.client.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out, nil
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

// healthOf reads the object of s with a GET and gives the verdict on it.
func (m *Manager) healthOf(ctx context.Context, s plan.Step) Health {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.GroupVersionKind())
	err := m.client.Get(ctx, client.ObjectKey{Namespace: s.ID.Namespace, Name: s.ID.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return Health{ID: s.ID, Origin: s.Object.Origin.String(), Status: status.NotFoundStatus, Message: "not found"}
	case err != nil:
		return Health{ID: s.ID, Origin: s.Object.Origin.String(), Status: status.UnknownStatus, Message: err.Error()}
	}
	return m.verdict(ctx, s, u)
}

// verdict is the health of s's object as read live (u).
func (m *Manager) verdict(ctx context.Context, s plan.Step, u *unstructured.Unstructured) Health {
	h := Health{ID: s.ID, Origin: s.Object.Origin.String()}
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
