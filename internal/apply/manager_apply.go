package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
)

// checked is the dry-run outcome for one step.
type checked struct {
	step   plan.Step
	action Action
	reason string
	// recreate means the change touches an immutable field and the object
	// opted in to being deleted and re-created.
	recreate bool
	// deferred means the step cannot be validated until a Namespace or
	// CRD of the same plan exists.
	deferred bool
	// adopted means the object exists without any Sync's label: applying
	// it makes it this Sync's.
	adopted bool
	err     error
	// desired is the object to write: the step's object without its
	// ignored fields. live and applied are the object in the cluster
	// (nil when absent) and the dry-run result.
	desired, live, applied *unstructured.Unstructured
}

// Apply validates every object of p with a server-side dry-run and, when
// all pass, applies those that differ from the cluster, wave by wave.
// Within a wave, its CRDs and Namespaces are written first; then its
// cluster-wide policies; then everything else, kind by kind within each
// namespace (an object waits for every object of a lower rank in its
// namespace, not for other namespaces); then its webhooks and APIServices.
//
// Objects equal to the cluster are not written (their resourceVersion does
// not change). Objects that can only be validated once a Namespace or CRD
// of the same plan exists are validated after those are applied and before
// anything else of their wave is; if they fail, Apply returns a
// *ValidationError listing what was written. After each wave but the last
// (and after the last with Options.Wait.Last) Apply waits until the wave
// is healthy; an unhealthy wave stops it with an *UnhealthyError. A
// failure while writing starts nothing more (nothing of a later rank in
// the failed object's namespace is written): what was in flight is
// finished. Either way the ChangeSet so far is returned with the error.
func (m *Manager) Apply(ctx context.Context, p plan.Plan) (ChangeSet, error) {
	m.fresh = nil // Namespaces an earlier Apply created are not empty now
	newNamespaces, newKinds := prerequisites(p.Apply)

	results := m.dryRunAll(ctx, p.Apply, newNamespaces, newKinds)
	if err := validationErrors(results, nil); err != nil {
		return nil, err
	}
	if m.opts.DryRun {
		return m.report(results), nil
	}
	if m.opts.BeforeWrite != nil {
		if err := m.opts.BeforeWrite(ctx); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotRecorded, err)
		}
	}
	var cs ChangeSet
	waves := p.Waves()
	offset := 0
	for wi, wave := range waves {
		group := results[offset : offset+len(wave)]
		offset += len(wave)
		waveStart := len(cs)
		// CRDs and Namespaces first, so that what lives in them can be
		// validated before it is written.
		n := 0
		for n < len(group) && group[n].step.Rank < plan.RankClusterPolicy {
			n++
		}
		done, err := m.write(ctx, group[:n])
		cs = append(cs, done...)
		if err != nil {
			return cs, err
		}
		if err := m.waitForCRDs(ctx, done); err != nil {
			return cs, err
		}
		for _, c := range done {
			if c.ID.Kind == "Namespace" && c.ID.Group == "" && c.Action == Created {
				if m.fresh == nil {
					m.fresh = map[string]bool{}
				}
				m.fresh[c.ID.Name] = true
			}
		}
		if err := m.recheck(ctx, results[offset-len(wave)+n:], cs); err != nil {
			return cs, err
		}
		for _, stage := range stages(group[n:]) {
			done, err := m.write(ctx, stage)
			cs = append(cs, done...)
			if err != nil {
				return cs, err
			}
		}
		w := Wave{Number: wave[0].Wave, Index: wi, Count: len(waves), Steps: wave, Changes: cs[waveStart:], SoFar: cs}
		if !w.Last() || m.opts.Wait.Last {
			if err := m.waitWave(ctx, w); err != nil {
				return cs, err
			}
		}
	}
	return cs, nil
}

// Wave is a wave just written, as Apply waits for it.
type Wave struct {
	// Number is the wave's driftless.dev/wave value; Index and Count its
	// place among the plan's waves.
	Number, Index, Count int
	Steps                []plan.Step
	// Changes are what was done to the wave's objects; SoFar to every
	// object of this and earlier waves.
	Changes, SoFar ChangeSet
}

// Last reports whether this is the plan's last wave.
func (w Wave) Last() bool { return w.Index == w.Count-1 }

// recheck validates the deferred results among rest, now that the
// Namespaces and CRDs written so far exist; those that still cannot be
// validated (their Namespace comes in a later wave) stay deferred until
// their own wave. An object of the current wave that still cannot be
// validated is an error.
func (m *Manager) recheck(ctx context.Context, rest []checked, written ChangeSet) error {
	var idx []int
	var steps []plan.Step
	for i, r := range rest {
		if r.deferred {
			idx = append(idx, i)
			steps = append(steps, r.step)
		}
	}
	if len(steps) == 0 {
		return nil
	}
	later := map[string]bool{}
	for _, r := range rest {
		if r.step.Wave != rest[0].step.Wave && r.step.Rank < plan.RankClusterPolicy {
			if r.step.ID.Kind == "Namespace" {
				later[r.step.ID.Name] = true
			}
		}
	}
	newNamespaces, newKinds := prerequisites(stepsOf(rest))
	rechecked := m.dryRunAll(ctx, steps, newNamespaces, newKinds)
	var failed []checked
	for j, r := range rechecked {
		if r.deferred && r.step.Wave == rest[0].step.Wave && !later[r.step.ID.Namespace] {
			r.deferred = false
			r.err = fmt.Errorf("its Namespace or CRD does not exist")
		}
		rest[idx[j]] = r
		if r.err != nil {
			failed = append(failed, r)
		}
	}
	return validationErrors(failed, written)
}

func stepsOf(rs []checked) []plan.Step {
	out := make([]plan.Step, len(rs))
	for i, r := range rs {
		out[i] = r.step
	}
	return out
}

// prerequisites returns the Namespaces and custom kinds that stage 1
// creates.
func prerequisites(stage1 []plan.Step) (namespaces, kinds map[string]bool) {
	namespaces, kinds = map[string]bool{}, map[string]bool{}
	for _, s := range stage1 {
		switch s.ID.Kind {
		case "Namespace":
			namespaces[s.ID.Name] = true
		case "CustomResourceDefinition":
			group, _, _ := unstructured.NestedString(s.Object.Object.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(s.Object.Object.Object, "spec", "names", "kind")
			kinds[group+"/"+kind] = true
		}
	}
	return namespaces, kinds
}

func validationErrors(results []checked, written ChangeSet) error {
	var errs []*ObjectError
	var transient []error
	for _, r := range results {
		if r.err == nil {
			continue
		}
		oe := &ObjectError{ID: r.step.ID, Origin: r.step.Object.Origin.String(), Err: r.err}
		if isTransient(r.err) {
			transient = append(transient, oe)
			continue
		}
		errs = append(errs, oe)
	}
	if len(transient) > 0 {
		// The server could not answer (timeout, throttling, an unreachable
		// webhook): nothing was written, and a retry may succeed.
		return fmt.Errorf("%w, nothing was applied: %w", ErrValidationIncomplete, errors.Join(transient...))
	}
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errs: errs, Written: written}
}

// isTransient reports whether err says the API server could not decide,
// rather than that the object is wrong.
func isTransient(err error) bool {
	var conflict *ConflictError
	var invalid *invalidObjectError
	switch {
	case errors.As(err, &conflict), errors.As(err, &invalid):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return true
	case apierrors.IsInternalError(err):
		// Mostly deterministic (a value of the wrong type), except an
		// admission webhook that could not be reached.
		return strings.Contains(err.Error(), "failed calling webhook")
	}
	var status apierrors.APIStatus
	return !errors.As(err, &status) && !meta.IsNoMatchError(err)
}

func (m *Manager) dryRunAll(ctx context.Context, steps []plan.Step, newNamespaces, newKinds map[string]bool) []checked {
	// Objects in a Namespace that this plan creates and that does not
	// exist yet cannot be validated now: defer them without a request.
	absent := m.absentNamespaces(ctx, newNamespaces)
	return byRank(ctx, m, steps, func(s plan.Step) plan.Rank { return 0 }, func(ctx context.Context, s plan.Step) checked {
		if absent[s.ID.Namespace] {
			return checked{step: s, deferred: true}
		}
		r := m.dryRun(ctx, s)
		if r.err != nil && canDefer(r.err, s, newNamespaces, newKinds) {
			return checked{step: s, deferred: true}
		}
		if !m.opts.DryRun && (r.action != Configured || m.opts.Keep == nil || !m.opts.Keep(s.ID)) {
			// Only a dry run's report shows the objects before and
			// after (and a write the caller asked to Keep); a write
			// needs neither, and the server's answers for every object
			// of a large plan are the most this process holds at once.
			r.live, r.applied = nil, nil
		}
		return r
	})
}

// absentNamespaces returns which of names do not exist in the cluster,
// asking for up to Concurrency of them at a time.
func (m *Manager) absentNamespaces(ctx context.Context, names map[string]bool) map[string]bool {
	list := make([]string, 0, len(names))
	for name := range names {
		list = append(list, name)
	}
	found := byRank(ctx, m, list, func(string) plan.Rank { return 0 }, func(ctx context.Context, name string) bool {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		return !apierrors.IsNotFound(m.client.Get(ctx, client.ObjectKey{Name: name}, ns))
	})
	absent := map[string]bool{}
	for i, name := range list {
		if !found[i] {
			absent[name] = true
		}
	}
	return absent
}

// canDefer reports whether err only says that a Namespace or CRD the plan
// itself creates does not exist yet.
func canDefer(err error, s plan.Step, newNamespaces, newKinds map[string]bool) bool {
	if meta.IsNoMatchError(err) {
		return newKinds[s.ID.Group+"/"+s.ID.Kind]
	}
	var status apierrors.APIStatus
	if apierrors.IsNotFound(err) && errors.As(err, &status) {
		d := status.Status().Details
		return d != nil && d.Kind == "namespaces" && newNamespaces[s.ID.Namespace]
	}
	return false
}

// report is the ChangeSet a dry run would produce, with the objects
// before and after for diffs.
func (m *Manager) report(results []checked) ChangeSet {
	cs := make(ChangeSet, 0, len(results))
	for _, r := range results {
		c := Change{ID: r.step.ID, Origin: r.step.Object.Origin.String(), Action: r.action, Reason: r.reason, Adopted: r.adopted, Live: r.live, Applied: r.applied}
		if r.deferred {
			c.Action, c.Applied = Created, r.desired
			c.Reason = "validated once the Namespace or CRD it needs exists"
		}
		cs = append(cs, c)
	}
	return cs
}

func (m *Manager) dryRun(ctx context.Context, s plan.Step) checked {
	desired, err := withoutIgnoredFields(s.Object.Object)
	if err != nil {
		return checked{step: s, err: &invalidObjectError{err: err}}
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	var dry *unstructured.Unstructured
	if m.fresh[s.ID.Namespace] {
		// Its Namespace was created by this apply a moment ago: nothing
		// can be in it yet.
		live = nil
	} else {
		// The dry run goes first: its answer tells whether the object
		// exists (a dry-run create has no resourceVersion), so that a new
		// object costs no read. An existing one is read for what only the
		// object before the apply says: its owner, its annotations, and
		// what changed.
		dry = desired.DeepCopy()
		dryErr := m.dryApply(ctx, dry)
		if dryErr == nil && dry.GetResourceVersion() == "" {
			return checked{step: s, action: Created, desired: desired, applied: dry}
		}
		err = m.client.Get(ctx, client.ObjectKeyFromObject(desired), live)
		switch {
		case apierrors.IsNotFound(err) && dryErr != nil:
			return checked{step: s, desired: desired, err: concise(dryErr)}
		case apierrors.IsNotFound(err):
			live, dry = nil, nil // deleted since the dry run
		case err != nil:
			return checked{step: s, err: err}
		case dryErr != nil:
			// Dry-run again with the object read: an immutable field
			// is told apart from other refusals then.
			dry = nil
		}
	}
	if live != nil {
		if adopted := adoptIgnored(desired, live); adopted != desired {
			// Fields the cluster owns are kept as found: the object to
			// validate is another one.
			desired, dry = adopted, nil
		}
	}
	r := m.check(ctx, s, desired, live, dry)
	r.desired = desired
	return r
}

// dryApply validates obj with a server-side apply dry run and replaces it
// with the server's answer.
func (m *Manager) dryApply(ctx context.Context, obj *unstructured.Unstructured) error {
	return m.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(m.opts.FieldManager), client.ForceOwnership, client.DryRunAll)
}

// check decides what applying desired over live (nil when absent) does.
// dry is the dry run of desired already made, or nil to make it now.
func (m *Manager) check(ctx context.Context, s plan.Step, desired, live, dry *unstructured.Unstructured) checked {
	owner, labelled := "", false
	if live != nil {
		owner, labelled = live.GetLabels()[v1alpha1.SyncLabel]
		if labelled && owner != m.opts.Owner {
			return checked{step: s, live: live, err: &ConflictError{Owner: owner, Claimant: m.opts.Owner}}
		}
	}
	if live != nil && live.GetAnnotations()[v1alpha1.ReconcileAnnotation] == v1alpha1.Disabled {
		return checked{step: s, action: Skipped, live: live, reason: v1alpha1.ReconcileAnnotation + ": disabled on the object in the cluster"}
	}
	if live != nil && live.GetDeletionTimestamp() != nil {
		return checked{step: s, err: errors.New("the object is being deleted; it will be re-created once it is gone")}
	}
	r := m.checkApply(ctx, s, desired, live, dry)
	r.adopted = r.err == nil && live != nil && !labelled
	if r.adopted {
		r.reason = "adopted: it had no " + v1alpha1.SyncLabel + " label"
	}
	return r
}

func (m *Manager) checkApply(ctx context.Context, s plan.Step, desired, live, dry *unstructured.Unstructured) checked {
	var err error
	if dry == nil {
		dry = desired.DeepCopy()
		err = m.dryApply(ctx, dry)
	}
	if err != nil {
		if live != nil && isImmutable(err) {
			if desired.GetAnnotations()[v1alpha1.ForceAnnotation] == v1alpha1.Enabled {
				// Validate the replacement before anything is deleted: a
				// dry-run create is validated and admitted before the
				// storage layer finds the name taken.
				err := m.client.Create(ctx, desired.DeepCopy(), client.DryRunAll, client.FieldOwner(m.opts.FieldManager))
				if err != nil && !apierrors.IsAlreadyExists(err) {
					return checked{step: s, err: fmt.Errorf("the re-created object would be refused: %w", concise(err))}
				}
				return checked{step: s, action: Configured, recreate: true, live: live, applied: desired,
					reason: "re-created: an immutable field changed and " + v1alpha1.ForceAnnotation + " is enabled"}
			}
			return checked{step: s, err: fmt.Errorf("%w: change the field back in git, or annotate the object with %s: %s to let driftless delete and re-create it",
				concise(err), v1alpha1.ForceAnnotation, v1alpha1.Enabled)}
		}
		return checked{step: s, err: concise(err)}
	}
	switch {
	case live == nil:
		return checked{step: s, action: Created, applied: dry}
	case Equal(live, dry):
		return checked{step: s, action: Unchanged, live: live, applied: dry}
	}
	return checked{step: s, action: Configured, live: live, applied: dry}
}

// invalidObjectError is a fault of the object itself that driftless finds
// before asking the server, such as a malformed ignore-fields pointer: not
// transient, it needs a fix in git.
type invalidObjectError struct{ err error }

func (e *invalidObjectError) Error() string { return e.err.Error() }
func (e *invalidObjectError) Unwrap() error { return e.err }

func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "immutable")
}

// stages splits the results of one wave, past its CRDs and Namespaces,
// where a write must wait for everything before it: cluster-wide policy
// (quotas, limit ranges, classes) that admission of the rest consults,
// then everything else, then the webhooks and APIServices that will
// intercept requests once written.
func stages(results []checked) [][]checked {
	var out [][]checked
	for start := 0; start < len(results); {
		end := start + 1
		for end < len(results) && stageOf(results[end].step.Rank) == stageOf(results[start].step.Rank) {
			end++
		}
		out = append(out, results[start:end])
		start = end
	}
	return out
}

func stageOf(r plan.Rank) int {
	switch {
	case r < plan.RankClusterPolicy:
		return 0
	case r == plan.RankClusterPolicy:
		return 1
	case r < plan.RankWebhook:
		return 2
	}
	return 3
}

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
	if r.recreate {
		if err := m.deleteAndWait(ctx, r.desired); err != nil {
			return err
		}
	}
	obj := r.desired.DeepCopy()
	if err := m.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(m.opts.FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	if m.opts.Written != nil {
		m.opts.Written(obj) // the server's answer: this write's resourceVersion
	}
	return nil
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
