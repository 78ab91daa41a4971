package drift

import (
	"testing"
	"time"
)

func TestPolicyBacksOffFromAFight(t *testing.T) {
	p := DefaultPolicy()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ago := func(d ...time.Duration) []time.Time {
		var ts []time.Time
		for _, x := range d {
			ts = append(ts, now.Add(-x))
		}
		return ts
	}
	tests := []struct {
		name    string
		reverts []time.Time
		revert  bool
	}{
		{"a first edit is reverted", nil, true},
		{"two reverts in the window still revert", ago(50*time.Second, 10*time.Second), true},
		{"three reverts in the window is a fight: pause", ago(90*time.Second, 50*time.Second, 10*time.Second), false},
		{"reverts long forgotten do not count", ago(20*time.Minute, 19*time.Minute, 18*time.Minute, 10*time.Second), true},
		{"after the pause it tries again", ago(110*time.Second, 100*time.Second, 90*time.Second), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(now, tt.reverts)
			if d.Revert != tt.revert {
				t.Errorf("Revert = %v (%s), want %v", d.Revert, d.Reason, tt.revert)
			}
			if !d.Revert && (d.RetryAfter <= 0 || d.Reason == "") {
				t.Errorf("a pause must say why and when to retry: %+v", d)
			}
		})
	}
}

func TestPolicyPauseGrowsWithTheFight(t *testing.T) {
	p := DefaultPolicy()
	now := time.Now()
	three := p.Decide(now, []time.Time{now.Add(-3 * time.Second), now.Add(-2 * time.Second), now.Add(-time.Second)})
	five := p.Decide(now, []time.Time{now.Add(-5 * time.Second), now.Add(-4 * time.Second), now.Add(-3 * time.Second), now.Add(-2 * time.Second), now.Add(-time.Second)})
	if five.RetryAfter <= three.RetryAfter {
		t.Errorf("pause after 5 reverts (%s) is not longer than after 3 (%s)", five.RetryAfter, three.RetryAfter)
	}
}

func TestPolicyPauseKeepsGrowingWhileTheWriterKeepsFlipping(t *testing.T) {
	p := DefaultPolicy()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var reverts []time.Time
	var longest time.Duration
	// A writer that flips the value back one second after every revert,
	// for an hour.
	for t := now; t.Before(now.Add(time.Hour)); {
		d := p.Decide(t, reverts)
		if d.Revert {
			reverts = append(reverts, t)
			t = t.Add(time.Second)
			continue
		}
		longest = max(longest, d.RetryAfter)
		t = t.Add(d.RetryAfter)
	}
	if longest < p.MaxBackoff-time.Minute {
		t.Errorf("longest pause %s, want it to grow towards %s", longest, p.MaxBackoff)
	}
	if len(reverts) > 20 {
		t.Errorf("%d reverts in an hour of fighting, want few", len(reverts))
	}
}

func TestHistoryForgetsOldReverts(t *testing.T) {
	h := NewHistory(time.Minute)
	now := time.Now()
	h.Record("a", now.Add(-2*time.Minute))
	h.Record("a", now.Add(-time.Second))
	if got := h.Times("a", now); len(got) != 1 {
		t.Errorf("Times = %v, want only the recent revert", got)
	}
}

func TestAPauseIsAnnouncedOnceAndEndsWithItsTimeOrARevert(t *testing.T) {
	h := NewHistory(time.Hour)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if !h.Pause("s/a", now, now.Add(time.Minute)) {
		t.Error("the first pause of a fight was not a new pause")
	}
	if h.Pause("s/a", now.Add(time.Second), now.Add(time.Minute)) {
		t.Error("an edit during the pause started another pause")
	}
	if !h.Paused("s/a", now.Add(30*time.Second)) || !h.AnyPaused("s/", now.Add(30*time.Second)) || h.AnyPaused("t/", now) {
		t.Error("the pause is not seen while it lasts, or is seen for another Sync")
	}
	if h.Paused("s/a", now.Add(time.Minute)) || h.AnyPaused("s/", now.Add(time.Minute)) {
		t.Error("the pause outlived its end")
	}
	if !h.Pause("s/a", now.Add(2*time.Minute), now.Add(3*time.Minute)) {
		t.Error("a pause after the last one ended was not a new pause")
	}
	h.Record("s/a", now.Add(2*time.Minute))
	if h.Paused("s/a", now.Add(2*time.Minute)) {
		t.Error("a revert did not end the pause")
	}
}
