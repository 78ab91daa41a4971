package drift

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Policy decides whether to revert an object again, so that driftless
// backs off from a fight with another writer instead of looping.
type Policy struct {
	// Window and MaxReverts: after MaxReverts reverts of one object
	// within Window, driftless stops reverting it for a while.
	Window     time.Duration
	MaxReverts int
	// Backoff is the first pause; it doubles with each further revert in
	// the window, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// DefaultPolicy returns the agent's policy: 3 reverts in 2 minutes is a
// fight; pause 1 minute, doubling up to 15 minutes.
func DefaultPolicy() Policy {
	return Policy{Window: 2 * time.Minute, MaxReverts: 3, Backoff: time.Minute, MaxBackoff: 15 * time.Minute}
}

// Decision is the outcome of Decide.
type Decision struct {
	Revert bool
	// Reason explains a decision not to revert.
	Reason string
	// RetryAfter is when to look at the object again.
	RetryAfter time.Duration
}

// Decide says whether to revert now, given the times of the object's
// earlier reverts. MaxReverts reverts within Window start a fight; while
// it goes on (the writer flips the object back within Window of each
// revert), every further revert remembered (up to Window+MaxBackoff ago)
// doubles the pause.
func (p Policy) Decide(now time.Time, reverts []time.Time) Decision {
	var inWindow, remembered int
	var last time.Time
	for _, t := range reverts {
		age := now.Sub(t)
		if age < p.Window+p.MaxBackoff {
			remembered++
			if t.After(last) {
				last = t
			}
		}
		if age < p.Window {
			inWindow++
		}
	}
	fighting := inWindow >= p.MaxReverts || (remembered >= p.MaxReverts && now.Sub(last) < p.Window)
	if !fighting {
		return Decision{Revert: true}
	}
	backoff := p.Backoff
	for i := p.MaxReverts; i < remembered && backoff < p.MaxBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, p.MaxBackoff)
	if wait := backoff - now.Sub(last); wait > 0 {
		return Decision{
			Reason: fmt.Sprintf("reverted %d times lately: another writer keeps changing it; pausing reverts for %s. "+
				"Find that writer, or let it own the field with driftless.dev/ignore-fields", remembered, backoff),
			RetryAfter: wait,
		}
	}
	return Decision{Revert: true}
}

// History remembers when each object was last reverted, and until when
// its reverts are paused.
type History struct {
	mu      sync.Mutex
	reverts map[string][]time.Time
	pauses  map[string]time.Time
	keep    time.Duration
}

// NewHistory keeps reverts for keep (at least the policy's window).
func NewHistory(keep time.Duration) *History {
	return &History{reverts: map[string][]time.Time{}, pauses: map[string]time.Time{}, keep: keep}
}

// Pause notes that reverts of key are paused until until. It reports
// whether that starts a pause (none of key was going on at now): a fight
// is announced once, not again at each edit during its pause.
func (h *History) Pause(key string, now, until time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	end, going := h.pauses[key]
	going = going && now.Before(end)
	if !going || until.After(end) {
		h.pauses[key] = until
	}
	return !going
}

// Paused reports whether reverts of key are paused at now (Pause), and
// forgets a pause that has ended.
func (h *History) Paused(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	end, ok := h.pauses[key]
	if ok && !now.Before(end) {
		delete(h.pauses, key)
		return false
	}
	return ok
}

// AnyPaused reports whether the reverts of any key starting with prefix
// are paused at now.
func (h *History) AnyPaused(prefix string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, end := range h.pauses {
		if !now.Before(end) {
			delete(h.pauses, key)
			continue
		}
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

// Times returns the recorded reverts of key.
func (h *History) Times(key string, now time.Time) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := h.reverts[key]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) > h.keep {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(h.reverts, key)
	} else {
		h.reverts[key] = ts
	}
	return append([]time.Time(nil), ts...)
}

// Record notes a revert of key at t, which ends its pause.
func (h *History) Record(key string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reverts[key] = append(h.reverts[key], t)
	delete(h.pauses, key)
}
