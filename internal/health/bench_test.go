package health

import (
	"context"
	"testing"

	"github.com/driftless/driftless/api/v1alpha1"
)

// What the agent pays per Sync (Compile, once per sync and per admission)
// and per object and poll (Evaluate).
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := Compile([]v1alpha1.HealthCheck{phaseCheck}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluate(b *testing.B) {
	c, err := Compile([]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget",
		Current: "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
		Failed:  "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')"}})
	if err != nil {
		b.Fatal(err)
	}
	u := widget(map[string]any{"conditions": []any{
		map[string]any{"type": "Reconciling", "status": "False"},
		map[string]any{"type": "Ready", "status": "True"}}})
	for b.Loop() {
		if r, _ := c.Evaluate(context.Background(), u); r.Status != "Current" {
			b.Fatal(r)
		}
	}
}
