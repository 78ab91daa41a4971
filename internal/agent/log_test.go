package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Each run logs to its own writer in its own format; an agent that stops
// late (a test's agent slow to shut down) must not silence the log of
// the agent that started after it; between runs nothing is written.
func TestEachAgentRunKeepsItsOwnLogAndALateStopDoesNotSilenceTheNext(t *testing.T) {
	var first, second bytes.Buffer
	s := &logSwitch{}
	log := logr.New(&runSink{sw: s}).WithName("drift").WithValues("sync", "shop/web")
	a := &logRun{logger: zap.New(zap.WriteTo(&first), zap.ConsoleEncoder())}
	b := &logRun{logger: zap.New(zap.WriteTo(&second), zap.JSONEncoder())}
	s.set(a)
	log.Info("one")
	s.set(b)
	s.release(a) // the first agent's Serve returns only now
	log.Info("two")
	s.release(b)
	log.Info("three")
	if got := first.String(); !strings.Contains(got, "one") || !strings.Contains(got, "shop/web") || strings.Contains(got, "two") {
		t.Errorf("first agent's log %q, want only record one with its values", got)
	}
	if got := second.String(); !strings.Contains(got, `"msg":"two"`) || !strings.Contains(got, `"logger":"drift"`) || strings.Contains(got, "three") {
		t.Errorf("second agent's log %q, want only record two, as JSON with its name", got)
	}
}
