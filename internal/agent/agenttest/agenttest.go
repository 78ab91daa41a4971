// Package agenttest starts a real driftless agent in a test's process: the
// one way tests start an agent (internal/agent assembles it as
// `driftless agent` does). It is test equipment, not part of the product.
package agenttest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/testenv"
)

// Options returns the agent's defaults for a test: the agent talks to cfg
// (its own identity), lives in namespace, serves no metrics or probe port,
// elects no leader, keeps its git cache in a temporary directory of the
// test, and keeps the end of its log, which the test prints if it fails
// (a Sync that never became Ready then says why).
func Options(t testing.TB, cfg *rest.Config, namespace string) agent.Options {
	o := agent.DefaultOptions()
	o.Config = cfg
	o.Namespace = namespace
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.LeaderElect = false
	o.CacheDir = t.TempDir()
	tail := &logTail{}
	o.LogTo = tail
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last %d lines of the agent's log (namespace %s):\n%s", tailLines, namespace, tail.String())
		}
	})
	return o
}

// tailLines is how many lines of an agent's log a failed test prints.
const tailLines = 200

// logTail keeps the last tailLines lines written to it.
type logTail struct {
	mu    sync.Mutex
	lines []string
	part  []byte // the line being written, until its newline
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.part = append(l.part, p...)
			break
		}
		l.lines = append(l.lines, string(append(l.part, p[:i]...)))
		l.part, p = l.part[:0], p[i+1:]
		if len(l.lines) > 2*tailLines {
			l.lines = append(l.lines[:0], l.lines[len(l.lines)-tailLines:]...)
		}
	}
	return n, nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(append(lines, string(l.part)), "\n")
}

// Agent is an agent running in the test's process.
type Agent struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan struct{}
	err    error // what Run returned; set before done is closed
}

// Start runs the agent of o until Stop is called or the test ends. A
// refused option fails the test at once.
func Start(t testing.TB, o agent.Options) *Agent {
	t.Helper()
	ag, err := agent.New(o)
	if err != nil {
		t.Fatalf("start the agent: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.err = ag.Run(ctx)
	}()
	t.Cleanup(func() {
		if err := a.Stop(); err != nil && errors.Is(err, errStillRuns) {
			t.Error(err)
		}
	})
	return a
}

var errStillRuns = errors.New("the agent still runs a minute after its context was cancelled")

// Stop cancels the agent's context and returns what the agent returned:
// nil after a clean shutdown.
func (a *Agent) Stop() error {
	a.cancel()
	select {
	case <-a.done:
		return a.err
	case <-time.After(time.Minute):
		return errStillRuns
	}
}

// Eventually polls check until it returns "" and fails the test with
// check's last answer if that takes more than a minute or the agent exits.
func (a *Agent) Eventually(what string, check func() string) {
	a.t.Helper()
	a.Within(time.Minute, what, check)
}

// Within is Eventually with a deadline of d.
func (a *Agent) Within(d time.Duration, what string, check func() string) {
	a.t.Helper()
	testenv.Eventually(a.t, d, what, func() string {
		last := check()
		if last != "" {
			select {
			case <-a.done:
				a.t.Fatalf("%s: the agent exited (%v); last check: %s", what, a.err, last)
			default:
			}
		}
		return last
	})
}
