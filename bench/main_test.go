package main

import (
	"slices"
	"testing"
)

func TestTheFullProfileTimesItsLargestSizeOnce(t *testing.T) {
	full := options{full: true, repeats: 3, changeRepeats: 3, unthrottledRepeats: 3,
		concurrencies: []int{4, 8, 16, 32}, edits: 50, intervals: 6, intervalChanges: 1}

	small := full.forSize(5000)
	if small.repeats != 3 || small.edits != 50 || len(small.concurrencies) != 4 || small.unthrottledRepeats != 3 {
		t.Errorf("5,000 objects in the full profile: %+v, want the profile's options unchanged", small)
	}
	large := full.forSize(largeSize)
	if large.repeats != 1 || large.unthrottledRepeats != 0 || large.edits != 20 || large.intervals != 3 {
		t.Errorf("10,000 objects in the full profile: repeats %d, unthrottled %d, edits %d, intervals %d; want 1, 0, 20, 3",
			large.repeats, large.unthrottledRepeats, large.edits, large.intervals)
	}
	if !slices.Equal(large.concurrencies, []int{32}) {
		t.Errorf("10,000 objects in the full profile: floor concurrencies %v, want only the highest, [32]", large.concurrencies)
	}
	if full.repeats != 3 || len(full.concurrencies) != 4 {
		t.Errorf("forSize changed the profile's own options: %+v", full)
	}

	asked := options{repeats: 3, edits: 50, concurrencies: []int{4, 32}}
	if got := asked.forSize(10000); got.repeats != 3 || got.edits != 50 || len(got.concurrencies) != 2 {
		t.Errorf("-sizes 10000 without -full: %+v, want the options as given", got)
	}
}
