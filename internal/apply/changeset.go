package apply

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
)

// Action is what happened, or would happen, to one object.
type Action string

// The actions of a ChangeSet.
const (
	Created    Action = "Created"
	Configured Action = "Configured"
	Unchanged  Action = "Unchanged"
	Pruned     Action = "Pruned"
	Skipped    Action = "Skipped"
)

// Change is the outcome for one object.
type Change struct {
	ID plan.ID
	// Origin is where the object lives in git ("path#doc"), when known.
	Origin string
	Action Action
	// Reason explains a Skipped object or an unusual action, such as a
	// re-creation or an adoption.
	Reason string
	// Adopted means the object existed with no driftless.dev/sync label
	// (created by hand, or by Flux v1) and this change made it the Sync's.
	Adopted bool
	// Live and Applied are the object in the cluster before the change
	// (nil when it did not exist) and as it would be after it. Dry runs
	// and ApplyOne fill them, and Apply for the objects Options.Keep
	// names, for diffs and attribution; they may hold Secret data, so
	// views must mask it.
	Live, Applied *unstructured.Unstructured
}

// ChangeSet is the outcome of applying or pruning, in the order performed.
type ChangeSet []Change

// Count returns how many changes have action a.
func (cs ChangeSet) Count(a Action) int {
	n := 0
	for _, c := range cs {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Adopted returns the changes that adopted an object.
func (cs ChangeSet) Adopted() ChangeSet {
	var out ChangeSet
	for _, c := range cs {
		if c.Adopted {
			out = append(out, c)
		}
	}
	return out
}

// Summary reads "2 created, 1 configured, 40 unchanged, 1 pruned", with
// ", 1 skipped" only when something was skipped.
func (cs ChangeSet) Summary() string {
	parts := []string{
		fmt.Sprintf("%d created", cs.Count(Created)),
		fmt.Sprintf("%d configured", cs.Count(Configured)),
		fmt.Sprintf("%d unchanged", cs.Count(Unchanged)),
		fmt.Sprintf("%d pruned", cs.Count(Pruned)),
	}
	if n := cs.Count(Skipped); n > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", n))
	}
	return strings.Join(parts, ", ")
}

// ObjectError is the failure of one object, naming where it lives in git.
type ObjectError struct {
	ID     plan.ID
	Origin string
	Err    error
}

func (e *ObjectError) Error() string {
	if e.Origin == "" {
		return fmt.Sprintf("%s: %v", e.ID, e.Err)
	}
	return fmt.Sprintf("%s (%s): %v", e.ID, e.Origin, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// ErrValidationIncomplete means the API server could not answer a
// server-side dry-run (a timeout, throttling, an unreachable webhook):
// nothing was written, and a retry may succeed.
var ErrValidationIncomplete = errors.New("validation could not complete")

// ErrNotPrepared means Options.BeforeWrite failed: nothing was written.
// Apply returns it joined with BeforeWrite's own error, which says what
// could not be done.
var ErrNotPrepared = errors.New("could not prepare the first write, nothing was applied")

// ValidationError means the server-side dry-run refused one or more
// objects, so nothing was written — or, for objects that could only be
// validated once their Namespace or CRD existed, only what came before
// them: earlier waves, and those Namespaces and CRDs.
type ValidationError struct {
	Errs []*ObjectError
	// Written lists what was written before the failing objects could be
	// validated (earlier waves, new Namespaces and CRDs); empty in the
	// common case.
	Written ChangeSet
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d object(s) failed server-side validation", len(e.Errs))
	if len(e.Written) == 0 {
		b.WriteString(", nothing was applied")
	} else {
		fmt.Fprintf(&b, "; only the %d object(s) written before they could be validated were applied (earlier waves, and the Namespaces/CRDs they need)", len(e.Written))
	}
	for _, oe := range e.Errs {
		b.WriteString("\n- ")
		b.WriteString(oe.Error())
	}
	return b.String()
}

// FailedIDs returns the IDs of every *ObjectError in err (including
// errors joined with errors.Join).
func FailedIDs(err error) []plan.ID {
	var ids []plan.ID
	for _, oe := range ObjectErrors(err) {
		ids = append(ids, oe.ID)
	}
	return ids
}

// ObjectErrors returns every *ObjectError in err: joined with errors.Join,
// wrapped, or listed by a *ValidationError.
func ObjectErrors(err error) []*ObjectError {
	var out []*ObjectError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if oe, ok := err.(*ObjectError); ok {
			out = append(out, oe)
			return
		}
		if ve, ok := err.(*ValidationError); ok {
			out = append(out, ve.Errs...)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// ConflictError means that the object in the cluster carries another
// Sync's driftless.dev/sync label: two Syncs declare the same object.
type ConflictError struct {
	// Owner and Claimant are the label values ("<namespace>.<name>") of
	// the Sync that owns the object and of the one that declares it too.
	Owner, Claimant string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict: the object belongs to Sync %s (label %s=%s), and Sync %s declares it too; "+
		"remove it from one of the two Syncs' paths (or delete its %s label to let Sync %s adopt it)",
		syncName(e.Owner), v1alpha1.SyncLabel, e.Owner, syncName(e.Claimant), v1alpha1.SyncLabel, syncName(e.Claimant))
}

// syncName turns a label value "<namespace>.<name>" into "namespace/name";
// namespaces hold no ".", so the first one separates them.
func syncName(label string) string {
	if ns, name, ok := strings.Cut(label, "."); ok {
		return ns + "/" + name
	}
	return label
}

// Conflict reports whether any of the refused objects belongs to another
// Sync.
func (e *ValidationError) Conflict() bool {
	for _, oe := range e.Errs {
		var ce *ConflictError
		if errors.As(oe.Err, &ce) {
			return true
		}
	}
	return false
}
