package health

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/driftless/driftless/api/v1alpha1"
)

// phaseCheck is the check of docs/ordering-and-health.md for a custom
// resource whose status has only a phase.
var phaseCheck = v1alpha1.HealthCheck{
	APIVersion: "example.com/v1", Kind: "Widget",
	Current:    "status.phase == 'Running'",
	InProgress: "status.phase == 'Pending'",
	Failed:     "status.phase == 'Failed'",
}

func widget(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "shop", "generation": int64(1)},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestEvaluate(t *testing.T) {
	conditions := v1alpha1.HealthCheck{APIVersion: "example.com/v2", // the version does not matter
		Kind:    "Widget",
		Current: "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
		Failed:  "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')"}
	cases := []struct {
		name        string
		check       v1alpha1.HealthCheck
		status      map[string]any
		want        status.Status
		wantMessage string
	}{
		{"a Running phase is Current, naming current", phaseCheck, map[string]any{"phase": "Running"},
			status.CurrentStatus, "spec.healthChecks[0].current is true (status.phase == 'Running')"},
		{"a Failed phase is Failed, naming failed", phaseCheck, map[string]any{"phase": "Failed"},
			status.FailedStatus, "spec.healthChecks[0].failed is true (status.phase == 'Failed')"},
		{"a Pending phase is InProgress, naming inProgress", phaseCheck, map[string]any{"phase": "Pending"},
			status.InProgressStatus, "spec.healthChecks[0].inProgress is true (status.phase == 'Pending')"},
		{"an unknown phase is InProgress until current is true", phaseCheck, map[string]any{"phase": "Queued"},
			status.InProgressStatus, "spec.healthChecks[0].current is not true yet (status.phase == 'Running')"},
		{"no status yet is InProgress with the evaluation error", phaseCheck, nil,
			status.InProgressStatus, "spec.healthChecks[0].inProgress (status.phase == 'Pending') could not be evaluated: no such attribute"},
		{"an observed generation behind is InProgress whatever the phase", phaseCheck, map[string]any{"phase": "Running", "observedGeneration": int64(0)},
			status.InProgressStatus, "status.observedGeneration 0 is not metadata.generation 1 yet"},
		{"inProgress is evaluated before failed, as in Flux",
			v1alpha1.HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "false", InProgress: "true", Failed: "true"}, nil,
			status.InProgressStatus, "spec.healthChecks[0].inProgress is true (true)"},
		{"failed is evaluated before current, as in Flux",
			v1alpha1.HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "true", Failed: "true"}, nil,
			status.FailedStatus, "spec.healthChecks[0].failed is true (true)"},
		{"self is the object", v1alpha1.HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "self.status.phase == 'Running' && self.metadata.name == 'w'"},
			map[string]any{"phase": "Running"}, status.CurrentStatus, "spec.healthChecks[0].current is true"},
		{"a Ready condition False is Failed by Flux's conditions expressions", conditions,
			map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}},
			status.FailedStatus, "spec.healthChecks[0].failed is true"},
		{"a check for a group covers its kinds", v1alpha1.HealthCheck{APIVersion: "example.com/v1", Current: "status.phase == 'Running'"},
			map[string]any{"phase": "Running"}, status.CurrentStatus, "spec.healthChecks[0].current is true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile([]v1alpha1.HealthCheck{tc.check})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := c.Evaluate(context.Background(), widget(tc.status))
			if !ok {
				t.Fatal("the check does not cover the Widget")
			}
			if got.Status != tc.want || !strings.Contains(got.Message, tc.wantMessage) {
				t.Errorf("got %s %q, want %s containing %q", got.Status, got.Message, tc.want, tc.wantMessage)
			}
		})
	}
}

func TestEvaluateLeavesOtherKindsToKstatus(t *testing.T) {
	c, err := Compile([]v1alpha1.HealthCheck{phaseCheck})
	if err != nil {
		t.Fatal(err)
	}
	other := widget(nil)
	other.SetKind("Gadget")
	if _, ok := c.Evaluate(context.Background(), other); ok {
		t.Error("a check for Widget decided a Gadget")
	}
	var none *Checks
	if _, ok := none.Evaluate(context.Background(), other); ok {
		t.Error("no checks decided an object")
	}
}

// An evaluation that goes over MaxCost, or runs longer than EvalTimeout,
// on the live object stops: the object stays InProgress, saying why.
func TestEvaluateStopsAtTheLimits(t *testing.T) {
	c, err := Compile([]v1alpha1.HealthCheck{
		{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.log.contains('done')"},
		{APIVersion: "example.com/v1", Kind: "Gadget", Current: "status.items.all(i, i == 'a')"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// contains costs a tenth of the string's length.
	long := widget(map[string]any{"log": strings.Repeat("x", 20*MaxCost)})
	got, _ := c.Evaluate(context.Background(), long)
	if got.Status != status.InProgressStatus || !strings.Contains(got.Message, "actual cost limit exceeded") {
		t.Errorf("got %s %q, want InProgress, cost limit exceeded", got.Status, got.Message)
	}
	// cel-go v0.29.2's cost tracking takes time that grows with the
	// square of a comprehension's length: 50,000 entries take minutes.
	items := make([]any, 50000)
	for i := range items {
		items[i] = "a"
	}
	many := widget(map[string]any{"items": items})
	many.SetKind("Gadget")
	got, _ = c.Evaluate(context.Background(), many)
	if got.Status != status.InProgressStatus || !strings.Contains(got.Message, "context deadline exceeded") {
		t.Errorf("got %s %q, want InProgress, deadline exceeded", got.Status, got.Message)
	}
}

func TestCompileRefuses(t *testing.T) {
	cases := []struct {
		name   string
		checks []v1alpha1.HealthCheck
		want   []string
	}{
		{"an expression that does not parse names its field",
			[]v1alpha1.HealthCheck{phaseCheck, {APIVersion: "example.com/v1", Kind: "Gadget", Current: "true", Failed: "status.phase =="}},
			[]string{"spec.healthChecks[1].failed: ERROR: <input>:1:16: Syntax error"}},
		{"an expression that is not a bool",
			[]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "'Running'"}},
			[]string{"spec.healthChecks[0].current: \"'Running'\" returns string, not a bool"}},
		{"a comprehension inside another is too costly",
			[]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "true",
				InProgress: "status.conditions.all(a, status.conditions.all(b, a.type != b.type || a == b))"}},
			[]string{"spec.healthChecks[0].inProgress: ", "is too costly", "over the limit of 100000000"}},
		{"an expression longer than the limit",
			[]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "true",
				Failed: "status.phase == '" + strings.Repeat("x", MaxExpressionLength) + "'"}},
			[]string{"spec.healthChecks[0].failed has 4114 bytes, over the limit of 4096: write a shorter expression"}},
		{"a missing current",
			[]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Failed: "true"}},
			[]string{"spec.healthChecks[0].current is empty"}},
		{"two checks for one kind",
			[]v1alpha1.HealthCheck{phaseCheck, phaseCheck},
			[]string{"spec.healthChecks[1] checks Widget.example.com again (spec.healthChecks[0] does)"}},
		{"an apiVersion that is not one",
			[]v1alpha1.HealthCheck{{APIVersion: "a/b/c", Kind: "Widget", Current: "true"}},
			[]string{"spec.healthChecks[0].apiVersion \"a/b/c\" is not an apiVersion"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.checks)
			if err == nil {
				t.Fatal("compiled")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") && len(tc.want) == 1 {
				t.Errorf("error %q is more than one line for one problem", err)
			}
		})
	}
}

// Expressions of Flux's CEL cheat sheet compile within the cost limit.
func TestCompileAcceptsFluxExpressions(t *testing.T) {
	exprs := []string{
		"status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
		"status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')",
		"has(status.phase) && status.phase == 'Ready'",
		"status.?conditions.orValue([]).exists(e, e.type == 'Ready' && e.status == 'True')",
		"status.readyReplicas == spec.replicas",
		"data.foo == 'bar'",
	}
	for _, x := range exprs {
		if _, err := Compile([]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: x}}); err != nil {
			t.Errorf("%s: %v", x, err)
		}
	}
}
