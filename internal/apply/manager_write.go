package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/plan"
)

// write applies the checked steps of one stage that differ from the
// cluster, with up to Concurrency requests in flight. Kinds keep their
// order within a namespace: a namespaced object is started once every
// object of a lower rank in its namespace, and every cluster-scoped object
// of a lower rank, has been written; a cluster-scoped object once every
// object of a lower rank has been. Namespaces do not wait for each other.
// After a failed write nothing more is started (so nothing of a later rank
// in that namespace is written); what is in flight is finished.
func (m *Manager) write(ctx context.Context, results []checked) (ChangeSet, error) {
	b := newBarriers(results)
	errs := make([]error, len(results))
	written := make([]bool, len(results))
	finished := make(chan int, len(results))
	inflight, failed := 0, false
	for {
		for len(b.ready) > 0 && inflight < m.opts.Concurrency && !failed {
			i := b.ready[0]
			b.ready = b.ready[1:]
			if a := results[i].action; (a == Unchanged || a == Skipped) && !results[i].recreate {
				written[i] = true // nothing to send
				b.done(i)
				continue
			}
			inflight++
			go func() {
				errs[i] = m.writeOne(ctx, results[i])
				finished <- i
			}()
		}
		if inflight == 0 {
			break
		}
		i := <-finished
		inflight--
		if errs[i] != nil {
			failed = true
			continue
		}
		written[i] = true
		b.done(i)
	}
	var cs ChangeSet
	var failures []error
	for i, r := range results {
		origin := r.step.Object.Origin.String()
		switch {
		case errs[i] != nil:
			failures = append(failures, &ObjectError{ID: r.step.ID, Origin: origin, Err: fmt.Errorf("apply failed: %w", errs[i])})
		case written[i]:
			cs = append(cs, Change{ID: r.step.ID, Origin: origin, Action: r.action, Reason: r.reason, Adopted: r.adopted, Live: r.live, Applied: r.applied})
		}
	}
	if !failed && len(cs) < len(results) {
		return cs, fmt.Errorf("apply stopped with %d of %d objects unwritten and no failure: this is a bug in driftless", len(results)-len(cs), len(results))
	}
	return cs, errors.Join(failures...)
}

// barriers releases the objects of one stage, in plan order (by rank, then
// namespace), as the kind order within each namespace allows. Each object
// is released once and each rank group of a namespace opened once, so the
// work is linear in the objects (times the handful of ranks for a
// cluster-scoped group).
type barriers struct {
	results []checked
	// byNS holds each namespace's rank groups ("" for cluster-scoped
	// objects), in rank order; cur is its first group not yet written.
	byNS  map[string]*nsGroups
	order []*nsGroups
	// left counts the objects not yet written, by rank.
	left map[plan.Rank]int
	// ready are the released objects not yet started, in release order.
	ready []int
}

type nsGroups struct {
	name   string
	groups []rankGroup
	cur    int
	open   bool
}

type rankGroup struct {
	rank    plan.Rank
	members []int
	left    int
}

func newBarriers(results []checked) *barriers {
	b := &barriers{results: results, byNS: map[string]*nsGroups{}, left: map[plan.Rank]int{}}
	for i, r := range results {
		ns, rank := r.step.ID.Namespace, r.step.Rank
		n := b.byNS[ns]
		if n == nil {
			n = &nsGroups{name: ns}
			b.byNS[ns] = n
			b.order = append(b.order, n)
		}
		if k := len(n.groups); k == 0 || n.groups[k-1].rank != rank {
			n.groups = append(n.groups, rankGroup{rank: rank})
		}
		g := &n.groups[len(n.groups)-1]
		g.members = append(g.members, i)
		g.left++
		b.left[rank]++
	}
	for _, n := range b.order {
		b.tryOpen(n)
	}
	return b
}

// tryOpen releases the first unwritten rank group of n if nothing it must
// follow is left.
func (b *barriers) tryOpen(n *nsGroups) {
	if n.open || n.cur == len(n.groups) {
		return
	}
	g := n.groups[n.cur]
	if n.name == "" {
		for r, left := range b.left {
			if r < g.rank && left > 0 {
				return
			}
		}
	} else if cluster := b.byNS[""]; cluster != nil && cluster.cur < len(cluster.groups) && cluster.groups[cluster.cur].rank < g.rank {
		return
	}
	n.open = true
	b.ready = append(b.ready, g.members...)
}

// done records that object i was written (or had nothing to write) and
// releases what waited only for it.
func (b *barriers) done(i int) {
	ns, rank := b.results[i].step.ID.Namespace, b.results[i].step.Rank
	n := b.byNS[ns]
	b.left[rank]--
	if n.groups[n.cur].left--; n.groups[n.cur].left == 0 {
		n.cur++
		n.open = false
		b.tryOpen(n)
		if ns == "" {
			for _, other := range b.order {
				b.tryOpen(other)
			}
		}
	}
	if b.left[rank] == 0 {
		if cluster := b.byNS[""]; cluster != nil {
			b.tryOpen(cluster)
		}
	}
}

// writeOne applies one checked step, unless it is Unchanged or Skipped.
func (m *Manager) writeOne(ctx context.Context, r checked) error {
	switch r.action {
	case Unchanged, Skipped:
		return nil
	}
	desired := r.desired
	if desired == nil {
		var err error
		if desired, err = desiredOf(r.step); err != nil {
			return &invalidObjectError{err: err}
		}
	}
	if r.recreate {
		if err := m.deleteAndWait(ctx, desired); err != nil {
			return err
		}
	}
	answer, err := m.applyForMetadata(ctx, desired)
	if err != nil {
		return err
	}
	if m.opts.Written != nil {
		m.opts.Written(answer) // the server's answer: this write's resourceVersion and managedFields
	}
	return nil
}

// applyForMetadata server-side applies obj (a dry run with
// client.DryRunAll in opts) and returns the API server's answer: obj's
// kind, namespace and name, and the metadata the server sent (UID,
// resourceVersion, generation, managedFields…), not the object's body.
// obj is neither copied nor changed. A write needs no more of the answer;
// the API server validates and admits the whole object either way.
func (m *Manager) applyForMetadata(ctx context.Context, obj *unstructured.Unstructured, opts ...client.PatchOption) (*metav1.PartialObjectMetadata, error) {
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, &invalidObjectError{err: err}
	}
	answer := &metav1.PartialObjectMetadata{}
	answer.SetGroupVersionKind(obj.GroupVersionKind())
	answer.SetNamespace(obj.GetNamespace())
	answer.SetName(obj.GetName())
	opts = append(opts, client.FieldOwner(m.opts.FieldManager), client.ForceOwnership)
	if err := m.client.Patch(ctx, answer, client.RawPatch(types.ApplyPatchType, data), opts...); err != nil {
		return nil, err
	}
	answer.SetGroupVersionKind(obj.GroupVersionKind())
	return answer, nil
}

func (m *Manager) deleteAndWait(ctx context.Context, obj *unstructured.Unstructured) error {
	live := obj.DeepCopy()
	if err := m.client.Delete(ctx, live, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete for re-creation: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, m.opts.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		err := m.client.Get(ctx, client.ObjectKeyFromObject(obj), live)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
}

// waitForCRDs waits until every CRD created or changed in cs is
// Established, so that its custom resources can be applied.
func (m *Manager) waitForCRDs(ctx context.Context, cs ChangeSet) error {
	for _, c := range cs {
		if c.ID.Kind != "CustomResourceDefinition" || (c.Action != Created && c.Action != Configured) {
			continue
		}
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, m.opts.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			if err := m.client.Get(ctx, client.ObjectKey{Name: c.ID.Name}, crd); err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				cm, _ := cond.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return &ObjectError{ID: c.ID, Origin: c.Origin, Err: fmt.Errorf("not Established within %s: %w", m.opts.WaitTimeout, err)}
		}
		// Discovery can lag behind Established by some milliseconds: the
		// custom resources are validated only once their kind is served.
		if err := m.waitForKind(ctx, crd); err != nil {
			return &ObjectError{ID: c.ID, Origin: c.Origin, Err: err}
		}
	}
	return nil
}

// waitForKind waits until the client's RESTMapper knows the kind that crd
// defines, at its storage version.
func (m *Manager) waitForKind(ctx context.Context, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	gk := schema.GroupKind{Group: group, Kind: kind}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, m.opts.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = m.client.RESTMapper().RESTMapping(gk)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("its kind %s is not served within %s: %w", gk, m.opts.WaitTimeout, errors.Join(err, last))
	}
	return nil
}

// concise rewords an API error whose message embeds whole objects (as
// validation errors of pod templates do) into its causes, field by field,
// keeping the error for errors.As.
func concise(err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || len(err.Error()) < 300 {
		return err
	}
	d := status.Status().Details
	if d == nil || len(d.Causes) == 0 {
		return err
	}
	var parts []string
	for _, c := range d.Causes {
		msg := c.Message
		if len(msg) > 160 {
			msg = msg[:60] + " … " + msg[len(msg)-80:]
		}
		parts = append(parts, c.Field+": "+msg)
	}
	return &conciseError{msg: fmt.Sprintf("%s %q is invalid: %s", d.Kind, d.Name, strings.Join(parts, "; ")), err: err}
}

type conciseError struct {
	msg string
	err error
}

func (e *conciseError) Error() string { return e.msg }
func (e *conciseError) Unwrap() error { return e.err }
