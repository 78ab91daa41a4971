package agent

import (
	"bytes"
	"testing"
)

// An agent that stops late (a test's agent slow to shut down) must not
// silence the log of the agent that started after it.
func TestALateStopDoesNotSilenceTheNextAgentsLog(t *testing.T) {
	var first, second bytes.Buffer
	s := &logSwitch{}
	a, b := &logRun{w: &first}, &logRun{w: &second}
	s.set(a)
	_, _ = s.Write([]byte("one "))
	s.set(b)
	s.release(a) // the first agent's Serve returns only now
	_, _ = s.Write([]byte("two "))
	s.release(b)
	_, _ = s.Write([]byte("three "))
	if first.String() != "one " || second.String() != "two " {
		t.Errorf("first agent's log %q, second's %q; want %q and %q", first.String(), second.String(), "one ", "two ")
	}
}
