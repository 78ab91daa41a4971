package testenv

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually asks its check again.
const PollInterval = 100 * time.Millisecond

// Eventually calls check until it returns "", every PollInterval, and
// fails the test (t.Fatalf, naming what and check's last answer) when
// within has passed. check says what it saw while it does not hold: that
// is the message of the failure, so make it the thing a reader needs.
// The one poll loop of the tests: no sleeps as synchronisation.
func Eventually(t testing.TB, within time.Duration, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		last := check()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last check: %s", what, within, last)
		}
		time.Sleep(PollInterval)
	}
}
