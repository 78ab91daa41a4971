package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// (nil when absent) and the dry-run result. A write keeps no desired
	// unless it was reshaped: the write decodes the step's JSON again
	// (see desiredOf), so that a plan's objects are not all held decoded
	// between their dry runs and their writes.
	desired, live, applied *unstructured.Unstructured
	// reshaped means desired holds fields of the live object (see
	// adoptIgnored): it cannot be made again from the step alone.
	reshaped bool
}

// desiredOf is the object to write for s: its desired object without
// its ignored fields.
func desiredOf(s plan.Step) (*unstructured.Unstructured, error) {
	obj, err := s.Desired()
	if err != nil {
		return nil, err
	}
	return withoutIgnoredFields(obj)
}

// recheck validates the deferred results among rest, now that the
// Namespaces and CRDs written so far exist; those that still cannot be
// validated (their Namespace comes in a later wave) stay deferred until
// their own wave. An object of the current wave that still cannot be
// validated is an error.
func (m *Manager) recheck(ctx context.Context, rest []checked, written ChangeSet) error {
	// Indexes into rest, not copies of its steps: a first sync into new
	// Namespaces defers every object, and copies of ten thousand steps
	// (and of their results) were among the most the apply held at once.
	var idx []int
	for i, r := range rest {
		if r.deferred {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
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
	newNamespaces, newKinds := prerequisites(len(rest), func(i int) *plan.Step { return &rest[i].step })
	absent := m.absentNamespaces(ctx, newNamespaces)
	byRank(ctx, m, idx, func(int) plan.Rank { return 0 }, func(ctx context.Context, i int) struct{} {
		rest[i] = m.dryRunOne(ctx, rest[i].step, absent, newNamespaces, newKinds)
		return struct{}{}
	})
	var failed []checked
	for _, i := range idx {
		r := &rest[i]
		if r.deferred && r.step.Wave == rest[0].step.Wave && !later[r.step.ID.Namespace] {
			r.deferred = false
			r.err = fmt.Errorf("its Namespace or CRD does not exist")
		}
		if r.err != nil {
			failed = append(failed, *r)
		}
	}
	return validationErrors(failed, written)
}

// prerequisites returns the Namespaces and custom kinds that stage 1
// creates: its n steps, step(i) the i-th.
func prerequisites(n int, step func(int) *plan.Step) (namespaces, kinds map[string]bool) {
	namespaces, kinds = map[string]bool{}, map[string]bool{}
	for i := range n {
		s := step(i)
		switch s.ID.Kind {
		case "Namespace":
			namespaces[s.ID.Name] = true
		case "CustomResourceDefinition":
			crd, err := s.Desired()
			if err != nil {
				continue // its dry run says so
			}
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
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
		return m.dryRunOne(ctx, s, absent, newNamespaces, newKinds)
	})
}

// dryRunOne validates s, or defers it when its Namespace is absent or
// only a Namespace or CRD of the plan is missing.
func (m *Manager) dryRunOne(ctx context.Context, s plan.Step, absent, newNamespaces, newKinds map[string]bool) checked {
	if absent[s.ID.Namespace] {
		return checked{step: s, deferred: true}
	}
	r := m.dryRun(ctx, s)
	if r.err != nil && canDefer(r.err, s, newNamespaces, newKinds) {
		return checked{step: s, deferred: true}
	}
	if r.action == Unchanged && r.err == nil && r.live != nil && m.opts.Found != nil {
		m.opts.Found(r.live)
	}
	if !m.opts.DryRun && (r.action != Configured || m.opts.Keep == nil || !m.opts.Keep(s.ID)) {
		// Only a dry run's report shows the objects before and
		// after (and a write the caller asked to Keep); a write
		// needs neither, and the server's answers for every object
		// of a large plan are the most this process holds at once.
		r.live, r.applied = nil, nil
		if !r.reshaped {
			r.desired = nil // writeOne decodes it again
		}
	}
	return r
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
	desired, err := desiredOf(s)
	if err != nil {
		return checked{step: s, err: &invalidObjectError{err: err}}
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	var dry *unstructured.Unstructured
	reshaped := false
	if m.fresh[s.ID.Namespace] {
		// Its Namespace was created by this apply a moment ago: nothing
		// can be in it yet.
		if !m.opts.DryRun {
			// It will be created, and a write keeps no dry-run answer of
			// a new object: the API server validates and admits it, and
			// answers with its metadata only.
			if _, err := m.applyForMetadata(ctx, desired, client.DryRunAll); err != nil {
				return checked{step: s, err: concise(err)}
			}
			return checked{step: s, action: Created, desired: desired}
		}
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
			reshaped = true
		}
	}
	r := m.check(ctx, s, desired, live, dry)
	r.desired, r.reshaped = desired, reshaped
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
