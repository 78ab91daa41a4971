package health

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftless/driftless/api/v1alpha1"
)

// The costliest expressions Compile accepts allocate in proportion to
// their cost: many small values (a literal split into characters, a list
// literal per character) that stay reachable until the evaluation ends.
// 64 evaluations at once (the agent's default --apply-concurrency reads
// that many objects' health) stay under 64 MiB of heap.
func TestConcurrentEvaluationsOfTheCostliestExpressionsStayUnder64MiB(t *testing.T) {
	literal := func(n int) string { return "'" + strings.Repeat("a", n) + "'" }
	splitTwice := "%s.split('').map(x, %s.split('')).size() > 0"
	n := (MaxExpressionLength - len(splitTwice)) / 2
	manyLists := literal(100) + ".split('').map(x, [x" + strings.Repeat(", x", (MaxExpressionLength-150)/3) + "]).size() > 0"
	for name, expr := range map[string]string{
		"a literal split, each character splitting it again":  strings.NewReplacer("%s", literal(n)).Replace(splitTwice),
		"a list literal made for each character of a literal": manyLists,
	} {
		t.Run(name, func(t *testing.T) {
			if len(expr) > MaxExpressionLength {
				t.Fatalf("the expression has %d bytes, more than Compile takes", len(expr))
			}
			c, err := Compile([]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: expr}})
			if err != nil {
				t.Fatalf("Compile refuses it: %v", err)
			}
			peak := peakHeap(func() {
				var wg sync.WaitGroup
				for range 64 {
					wg.Go(func() { c.Evaluate(context.Background(), widget(map[string]any{"phase": "Running"})) })
				}
				wg.Wait()
			})
			t.Logf("64 evaluations at once: %d MiB of heap at most", peak>>20)
			if peak > 64<<20 {
				t.Errorf("64 evaluations at once took %d MiB of heap, want under 64 MiB", peak>>20)
			}
		})
	}
}

// peakHeap runs f and returns the most heap it saw in use above what was
// in use before, sampled every millisecond.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base, peak := m.HeapAlloc, m.HeapAlloc
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak - base
}
