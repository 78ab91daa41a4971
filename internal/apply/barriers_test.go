package apply

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/driftless/driftless/internal/plan"
)

// TestBarriersReleaseEveryObjectOnceAfterTheLowerRanksOfItsNamespace
// drives the release of a stage the way write does, finishing released
// objects in a random order, at 10,000 objects in one namespace beside
// small namespaces and cluster-scoped custom resources.
func TestBarriersReleaseEveryObjectOnceAfterTheLowerRanksOfItsNamespace(t *testing.T) {
	kinds := []string{"ServiceAccount", "Secret", "ConfigMap", "Service", "Pod", "Widget"}
	var steps []plan.Step
	add := func(ns, kind string, n int) {
		for i := range n {
			id := plan.ID{Kind: kind, Namespace: ns, Name: fmt.Sprintf("o%05d", i)}
			steps = append(steps, plan.Step{ID: id, Rank: plan.RankOf(id)})
		}
	}
	for _, k := range kinds {
		add("big", k, 10_000/len(kinds))
		for n := range 50 {
			add(fmt.Sprintf("small-%02d", n), k, 2)
		}
	}
	add("", "Widget", 20) // cluster-scoped custom resources, rank 9
	slices.SortStableFunc(steps, func(a, b plan.Step) int {
		if a.Rank != b.Rank {
			return int(a.Rank - b.Rank)
		}
		if a.ID.Namespace < b.ID.Namespace {
			return -1
		}
		if a.ID.Namespace > b.ID.Namespace {
			return 1
		}
		return 0
	})
	results := make([]checked, len(steps))
	for i, s := range steps {
		results[i] = checked{step: s}
	}

	b := newBarriers(results)
	released := make([]int, len(results)) // how often each object was released
	doneRanks := map[string]map[plan.Rank]int{}
	left := map[string]map[plan.Rank]int{}
	leftByRank := map[plan.Rank]int{}
	for _, r := range results {
		ns := r.step.ID.Namespace
		if left[ns] == nil {
			left[ns], doneRanks[ns] = map[plan.Rank]int{}, map[plan.Rank]int{}
		}
		left[ns][r.step.Rank]++
		leftByRank[r.step.Rank]++
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var pending []int
	finished := 0
	for {
		for _, i := range b.ready {
			released[i]++
			ns, rank := results[i].step.ID.Namespace, results[i].step.Rank
			for r := range rank {
				if ns == "" && leftByRank[r] > 0 {
					t.Fatalf("%s released with %d objects of rank %d unwritten", results[i].step.ID, leftByRank[r], r)
				}
				if ns != "" && (left[ns][r] > 0 || left[""][r] > 0) {
					t.Fatalf("%s released before the rank %d of its namespace or the cluster was written", results[i].step.ID, r)
				}
			}
		}
		pending = append(pending, b.ready...)
		b.ready = nil
		if len(pending) == 0 {
			break
		}
		k := rng.IntN(len(pending))
		i := pending[k]
		pending[k] = pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		ns, rank := results[i].step.ID.Namespace, results[i].step.Rank
		left[ns][rank]--
		leftByRank[rank]--
		b.done(i)
		finished++
	}
	if finished != len(results) {
		t.Fatalf("%d of %d objects were released: the rest would never be written", finished, len(results))
	}
	for i, n := range released {
		if n != 1 {
			t.Errorf("%s was released %d times, want once", results[i].step.ID, n)
		}
	}
}
