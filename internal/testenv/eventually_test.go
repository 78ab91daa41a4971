package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and
// ends the goroutine as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// run calls f with r, returning once f returned or r's Fatalf was called.
func (r *fatalRecorder) run(f func(testing.TB)) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	f(r)
}

func TestEventuallyReturnsOnceTheCheckHoldsAndFailsWithItsLastAnswer(t *testing.T) {
	calls := 0
	ok := &fatalRecorder{TB: t}
	ok.run(func(tb testing.TB) {
		Eventually(tb, time.Minute, "the third call", func() string {
			if calls++; calls < 3 {
				return fmt.Sprintf("call %d", calls)
			}
			return ""
		})
	})
	if ok.msg != "" || calls != 3 {
		t.Errorf("Eventually of a check that holds at the third call: %d calls, failed with %q", calls, ok.msg)
	}

	never := &fatalRecorder{TB: t}
	never.run(func(tb testing.TB) {
		Eventually(tb, 300*time.Millisecond, "the impossible", func() string { return "still not" })
	})
	if !strings.Contains(never.msg, "the impossible") || !strings.Contains(never.msg, "still not") {
		t.Errorf("Eventually of a check that never holds failed with %q, want what was awaited and the last answer", never.msg)
	}
}
