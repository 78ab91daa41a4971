package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/driftless/driftless/api/v1alpha1"
)

// memState is a StateStore in memory.
type memState struct {
	mu   sync.Mutex
	data []byte
}

func (m *memState) Load(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.data, nil
}

func (m *memState) Save(_ context.Context, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = append([]byte(nil), data...)
	return nil
}

// run starts a dispatcher and returns its recorder and a stop that
// waits for it to end.
func run(t *testing.T, cfg Config, opts Options) (Recorder, *Dispatcher, func()) {
	t.Helper()
	if err := cfg.complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	d := NewDispatcher(cfg, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return Wrap(nopRecorder{}, d), d, stop
}

func TestARestartDoesNotResendAnOpenFailure(t *testing.T) {
	e := newEndpoint(t)
	cfg := Config{Targets: []Target{{Name: "ops", Type: TypeGeneric, URL: e.URL}}}
	state := &memState{}
	r, d, stop := run(t, cfg, Options{State: state})
	fail(r, "apps/web.yaml: yaml: line 3")
	d.Syncing(syncAt("https://127.0.0.1/org/fleet"), sha)
	e.waitFor(t, 1)
	stop() // saves on the way out

	if data, _ := state.Load(context.Background()); strings.Contains(string(data), "apps/web.yaml") {
		t.Errorf("the saved state holds the message itself: %s", data)
	}
	r, _, _ = run(t, cfg, Options{State: state})
	fail(r, "apps/web.yaml: yaml: line 3") // the same failure, seen again after the restart
	succeed(r)
	got := e.waitFor(t, 2)
	var events []Event
	for _, req := range got {
		var b GenericBody
		if err := json.Unmarshal(req.body, &b); err != nil {
			t.Fatal(err)
		}
		events = append(events, b.Event)
	}
	if len(events) != 2 || events[0] != Failed || events[1] != Recovered {
		t.Errorf("sent %v, want one failed before the restart and one recovered after it", events)
	}
}

func TestTheSavedStateIsBounded(t *testing.T) {
	cfg := Config{}
	if err := cfg.complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	d := NewDispatcher(cfg, Options{})
	now := time.Now()
	for i := range MaxPersisted + 50 {
		s := syncObj()
		s.Name = "s" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String()
		n, _ := noticeOf(s, "Warning", v1alpha1.ReasonBuildFailed, "Sync", "broken")
		d.dedup.observe(n, now.Add(time.Duration(i)*time.Second))
	}
	data, err := d.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Failing) != MaxPersisted || s.Failing[0].LastSent.Before(s.Failing[len(s.Failing)-1].LastSent) {
		t.Errorf("%d failing Syncs saved, newest first: %v; want the %d most recently sent", len(s.Failing), s.Failing[0].LastSent, MaxPersisted)
	}
	if len(data) > 900<<10 {
		t.Errorf("the saved state is %d bytes; a ConfigMap holds at most 1 MiB", len(data))
	}
}

func TestTheSavedStatusesAreTheMostRecentlySent(t *testing.T) {
	cfg := Config{}
	if err := cfg.complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	d := NewDispatcher(cfg, Options{Clock: clk})
	// By name the oldest come first: a cut by name would keep them.
	for i := range MaxPersisted + 50 {
		s := syncAt("https://127.0.0.1/org/fleet")
		s.Name = fmt.Sprintf("s%05d", i)
		d.routeStatus(statusNoticeOf(s, sha, StatePending, "", ""))
		clk.Step(time.Second)
	}
	data, err := d.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	saved := map[string]bool{}
	for _, st := range s.Statuses {
		saved[st.Sync] = true
	}
	if len(s.Statuses) != MaxPersisted || saved["team-a/s00049"] || !saved["team-a/s00050"] || !saved[fmt.Sprintf("team-a/s%05d", MaxPersisted+49)] {
		t.Errorf("%d statuses saved (s00049 %v, s00050 %v, newest %v); want the %d most recently sent",
			len(s.Statuses), saved["team-a/s00049"], saved["team-a/s00050"], saved[fmt.Sprintf("team-a/s%05d", MaxPersisted+49)], MaxPersisted)
	}

	// Restored, the times still order them.
	again := NewDispatcher(cfg, Options{Clock: clk})
	if err := again.restore(data, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if data2, _ := again.snapshot(); string(data2) != string(data) {
		t.Errorf("the restored state saves differently:\n%.300s\nwant\n%.300s", data2, data)
	}
}
