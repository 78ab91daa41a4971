package health

import (
	"context"
	"fmt"

	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// maxShown is how much of an expression a message quotes.
const maxShown = 80

// Result is the verdict of a health check on one object.
type Result struct {
	// Status is Current, InProgress or Failed.
	Status status.Status
	// Message names the expression that decided (its field and text), or
	// why none did.
	Message string
}

// Evaluate decides the health of the live object u by the check for its
// kind (or, failing that, its group). ok is false when no check names it:
// the caller then uses kstatus. In Flux's order: InProgress while
// status.observedGeneration (an integer) is not metadata.generation; then
// the first of inProgress, failed and current that is true decides; none
// true is InProgress. An expression that cannot be evaluated on u (a field
// it reads is missing, its cost or time ran out) leaves u InProgress, with
// the error in the message, and the later expressions are not evaluated.
func (c *Checks) Evaluate(ctx context.Context, u *unstructured.Unstructured) (Result, bool) {
	ch := c.find(u)
	if ch == nil {
		return Result{}, false
	}
	return ch.evaluate(ctx, u), true
}

// Covers reports whether a check names the kind of u.
func (c *Checks) Covers(u *unstructured.Unstructured) bool { return c.find(u) != nil }

func (c *Checks) find(u *unstructured.Unstructured) *check {
	if c == nil {
		return nil
	}
	gk := u.GroupVersionKind().GroupKind()
	if ch, ok := c.byKind[gk]; ok {
		return ch
	}
	return c.byGroup[gk.Group]
}

func (ch *check) evaluate(ctx context.Context, u *unstructured.Unstructured) Result {
	obj := u.UnstructuredContent()
	if og, ok, err := unstructured.NestedInt64(obj, "status", "observedGeneration"); err == nil && ok {
		if g, ok, err := unstructured.NestedInt64(obj, "metadata", "generation"); err == nil && ok && g != og {
			return Result{Status: status.InProgressStatus,
				Message: fmt.Sprintf("status.observedGeneration %d is not metadata.generation %d yet", og, g)}
		}
	}
	vars := make(map[string]any, len(obj)+1)
	for k, v := range obj {
		vars[k] = v
	}
	vars["self"] = obj
	for _, e := range []struct {
		x  *expression
		st status.Status
	}{{ch.inProgress, status.InProgressStatus}, {ch.failed, status.FailedStatus}, {ch.current, status.CurrentStatus}} {
		if e.x == nil {
			continue
		}
		true_, err := e.x.eval(ctx, vars)
		if err != nil {
			return Result{Status: status.InProgressStatus, Message: fmt.Sprintf("%s (%s) could not be evaluated: %v", e.x.field, shown(e.x.text), err)}
		}
		if true_ {
			return Result{Status: e.st, Message: fmt.Sprintf("%s is true (%s)", e.x.field, shown(e.x.text))}
		}
	}
	return Result{Status: status.InProgressStatus, Message: fmt.Sprintf("%s is not true yet (%s)", ch.current.field, shown(ch.current.text))}
}

// running holds a token for each evaluation under way (MaxConcurrent).
var running = make(chan struct{}, MaxConcurrent)

// eval runs the expression within MaxCost and EvalTimeout, once fewer
// than MaxConcurrent evaluations run (or ctx ends).
func (x *expression) eval(ctx context.Context, vars map[string]any) (bool, error) {
	select {
	case running <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-running }()
	ctx, cancel := context.WithTimeout(ctx, EvalTimeout)
	defer cancel()
	v, _, err := x.prog.ContextEval(ctx, vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("it returned %s, not a bool", v.Type().TypeName())
	}
	return bool(b), nil
}

func shown(text string) string {
	r := []rune(text)
	if len(r) > maxShown {
		return string(r[:maxShown]) + "…"
	}
	return text
}
