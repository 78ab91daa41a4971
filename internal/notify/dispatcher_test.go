package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/driftless/driftless/api/v1alpha1"
)

// endpoint is a test HTTP server on loopback that records what it is sent
// and answers with the statuses in answers, then 200.
type endpoint struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	answers  []int
}

type request struct {
	method string
	path   string // escaped, as sent
	body   []byte
	header http.Header
}

func newEndpoint(t *testing.T, answers ...int) *endpoint {
	e := &endpoint{answers: answers}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.requests = append(e.requests, request{method: r.Method, path: r.URL.EscapedPath(), body: b, header: r.Header.Clone()})
		status := http.StatusOK
		if len(e.answers) > 0 {
			status, e.answers = e.answers[0], e.answers[1:]
		}
		e.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) got() []request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]request(nil), e.requests...)
}

// waitFor polls until the endpoint has received n requests.
func (e *endpoint) waitFor(t *testing.T, n int) []request {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := e.got(); len(got) >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the endpoint received %d requests, want %d", len(e.got()), n)
	return nil
}

type nopRecorder struct{}

func (nopRecorder) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) {}

// start runs a dispatcher for targets and returns a recorder feeding it.
func start(t *testing.T, cfg Config, opts Options) (Recorder, *Dispatcher) {
	t.Helper()
	if err := cfg.complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	d := NewDispatcher(cfg, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return Wrap(nopRecorder{}, d), d
}

func syncObj() *v1alpha1.Sync {
	return &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop", Labels: map[string]string{"team": "a"}},
		Status: v1alpha1.SyncStatus{LastAppliedRevision: "1111111aaaaaaa", LastAttemptedRevision: "2222222bbbbbbb",
			History: []v1alpha1.SyncRecord{{Result: v1alpha1.ResultSucceeded, Configured: 1}}},
	}
}

func fail(r Recorder, note string) {
	r.Eventf(syncObj(), nil, corev1.EventTypeWarning, v1alpha1.ReasonBuildFailed, "Sync", "%s", note)
}

func succeed(r Recorder) {
	r.Eventf(syncObj(), nil, corev1.EventTypeNormal, v1alpha1.ReasonSucceeded, "Sync", "applied %s: 1 configured", "1111111")
}

func TestEachProviderGetsItsBody(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("s3cr3t-hmac-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		typ   string
		key   string
		check func(t *testing.T, r request)
	}{
		{name: "a generic endpoint gets the fields as JSON, signed with the key", typ: TypeGeneric, key: keyFile,
			check: func(t *testing.T, r request) {
				var b GenericBody
				if err := json.Unmarshal(r.body, &b); err != nil {
					t.Fatal(err)
				}
				if b.Sync != "shop" || b.Namespace != "team-a" || b.Event != Failed || b.Reason != "BuildFailed" ||
					b.Revision != "2222222bbbbbbb" || b.Count != 1 || b.Time.IsZero() || !strings.Contains(b.Message, "apps/web.yaml") {
					t.Errorf("body %s lacks a field", r.body)
				}
				if got, want := r.header.Get(SignatureHeader), Sign([]byte("s3cr3t-hmac-key"), r.body); got != want {
					t.Errorf("%s = %q, want %q", SignatureHeader, got, want)
				}
				if strings.Contains(string(r.body), "s3cr3t") {
					t.Error("the HMAC key is in the body")
				}
			}},
		{name: "a generic endpoint without a key gets no signature", typ: TypeGeneric,
			check: func(t *testing.T, r request) {
				if r.header.Get(SignatureHeader) != "" {
					t.Error("an unsigned target sent a signature")
				}
			}},
		{name: "Slack gets text with the summary and the note", typ: TypeSlack,
			check: func(t *testing.T, r request) {
				var b map[string]string
				if err := json.Unmarshal(r.body, &b); err != nil {
					t.Fatal(err)
				}
				if len(b) != 1 || !strings.Contains(b["text"], "Sync team-a/shop failed (BuildFailed) at 2222222") ||
					!strings.Contains(b["text"], "apps/web.yaml") {
					t.Errorf("body %s is not a Slack text message saying what failed where", r.body)
				}
			}},
		{name: "Teams gets one Adaptive Card", typ: TypeTeams,
			check: func(t *testing.T, r request) {
				var b struct {
					Type        string
					Attachments []struct {
						ContentType string
						Content     struct {
							Type string
							Body []struct{ Type, Text string }
						}
					}
				}
				if err := json.Unmarshal(r.body, &b); err != nil {
					t.Fatal(err)
				}
				if b.Type != "message" || len(b.Attachments) != 1 || b.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" ||
					b.Attachments[0].Content.Type != "AdaptiveCard" || len(b.Attachments[0].Content.Body) != 2 ||
					!strings.Contains(b.Attachments[0].Content.Body[1].Text, "apps/web.yaml") {
					t.Errorf("body %s is not a Teams Adaptive Card message", r.body)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndpoint(t)
			rec, _ := start(t, Config{Targets: []Target{{Name: "t", Type: tt.typ, URL: e.URL, HMACKeyFile: tt.key}}}, Options{})
			fail(rec, "apps/web.yaml: yaml: line 3: did not find expected key")
			got := e.waitFor(t, 1)
			if ct := got[0].header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			tt.check(t, got[0])
		})
	}
}

func TestTenIdenticalFailuresReachTheEndpointOnce(t *testing.T) {
	e := newEndpoint(t)
	rec, _ := start(t, Config{Targets: []Target{{Name: "t", Type: TypeGeneric, URL: e.URL}}}, Options{})
	for range 10 {
		fail(rec, "apps/web.yaml: bad")
	}
	succeed(rec)
	got := e.waitFor(t, 2)
	var evs []string
	for _, r := range got {
		var b GenericBody
		_ = json.Unmarshal(r.body, &b)
		evs = append(evs, string(b.Event))
	}
	if strings.Join(evs, ",") != "failed,recovered" {
		t.Errorf("the endpoint received %v, want failed then recovered", evs)
	}
}

func TestTargetsReceiveOnlyTheirSyncsAndEvents(t *testing.T) {
	all, other, onlyRecovered, byLabel := newEndpoint(t), newEndpoint(t), newEndpoint(t), newEndpoint(t)
	rec, _ := start(t, Config{Targets: []Target{
		{Name: "all", Type: TypeGeneric, URL: all.URL},
		{Name: "other", Type: TypeGeneric, URL: other.URL, Syncs: Selector{Namespaces: []string{"team-b"}}},
		{Name: "recovered", Type: TypeGeneric, URL: onlyRecovered.URL, Events: []Event{Recovered}},
		{Name: "label", Type: TypeGeneric, URL: byLabel.URL, Syncs: Selector{LabelSelector: "team=b"}},
	}}, Options{})
	fail(rec, "bad")
	succeed(rec)
	all.waitFor(t, 2)
	onlyRecovered.waitFor(t, 1)
	if n := len(other.got()) + len(byLabel.got()); n != 0 {
		t.Errorf("targets selecting other Syncs received %d messages", n)
	}
	if n := len(onlyRecovered.got()); n != 1 {
		t.Errorf("the recovered-only target received %d messages, want 1", n)
	}
}

func TestAnEndpointAnswering500IsRetriedUntilItAccepts(t *testing.T) {
	e := newEndpoint(t, 500, 502, 503)
	rec, _ := start(t, Config{Targets: []Target{{Name: "t", Type: TypeSlack, URL: e.URL}}}, Options{Attempts: 5})
	fail(rec, "bad")
	got := e.waitFor(t, 4)
	for i := 1; i < len(got); i++ {
		if string(got[i].body) != string(got[0].body) {
			t.Errorf("retry %d sent a different body", i)
		}
	}
	succeed(rec) // delivered after the retried message: nothing else was sent
	if got := e.waitFor(t, 5); len(got) != 5 {
		t.Errorf("the endpoint received %d requests, want 4 tries and one more message", len(got))
	}
}

func TestAnEndpointRefusingTheRequestIsNotRetried(t *testing.T) {
	e := newEndpoint(t, 404)
	rec, _ := start(t, Config{Targets: []Target{{Name: "t", Type: TypeSlack, URL: e.URL}}}, Options{Attempts: 5})
	fail(rec, "bad")
	succeed(rec)
	got := e.waitFor(t, 2)
	if !strings.Contains(string(got[1].body), "recovered") {
		t.Errorf("second request %s, want the next message rather than a retry of the refused one", got[1].body)
	}
}

func TestADeadEndpointNeverBlocksTheRecorderAndDropsAreCounted(t *testing.T) {
	unblock := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-unblock }))
	t.Cleanup(dead.Close)
	t.Cleanup(func() { close(unblock) })
	rec, d := start(t, Config{Targets: []Target{{Name: "dead", Type: TypeGeneric, URL: dead.URL}}},
		Options{QueueSize: 2, Timeout: time.Hour})
	done := make(chan struct{})
	go func() {
		for i := range 200 {
			fail(rec, fmt.Sprintf("failure %d", i)) // each distinct: none deduplicated
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Eventf blocked on a dead endpoint")
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.Dropped() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if d.Dropped() == 0 {
		t.Error("200 messages to a dead endpoint with queues of 2: none counted as dropped")
	}
}

func TestABurstOfDriftRevertsReachesTheEndpointAsOneMessage(t *testing.T) {
	e := newEndpoint(t)
	rec, _ := start(t, Config{DriftWindow: Duration{200 * time.Millisecond}, Targets: []Target{{Name: "t", Type: TypeGeneric, URL: e.URL}}},
		Options{FlushEvery: 10 * time.Millisecond})
	for range 5 {
		rec.Eventf(syncObj(), nil, corev1.EventTypeNormal, v1alpha1.ReasonDriftReverted, "Revert", "%s: %s",
			"Deployment/team-a/web", "reverted spec.replicas: git 3, found 5 (by kubectl-edit)")
	}
	got := e.waitFor(t, 1)
	var b GenericBody
	if err := json.Unmarshal(got[0].body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Event != DriftReverted || b.Count != 5 || !strings.Contains(b.Summary, "Deployment/team-a/web (5)") {
		t.Errorf("body %s, want one drift-reverted message counting 5", got[0].body)
	}
}

func TestConfigErrorsNameTheTargetNotTheURL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "notify.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, config, want string
	}{
		{"an unknown type", "targets:\n- name: chat\n  type: irc\n  url: https://hooks.example/T0KEN\n", `target chat: type "irc"`},
		{"an unknown event", "targets:\n- name: chat\n  type: slack\n  url: https://hooks.example/T0KEN\n  events: [exploded]\n", `event "exploded"`},
		{"a URL that is not http", "targets:\n- name: chat\n  type: slack\n  url: ftp://hooks.example/T0KEN\n", "not an absolute http"},
		{"a key on a Slack target", "targets:\n- name: chat\n  type: slack\n  url: https://hooks.example/T0KEN\n  hmacKeyFile: key\n", "generic only"},
		{"a missing URL file", "targets:\n- name: chat\n  type: slack\n  urlFile: nowhere\n", "urlFile"},
		{"a bad reminder", "reminder: soon\ntargets: []\n", "not a duration"},
		{"an unknown field", "targets:\n- name: chat\n  type: slack\n  url: https://hooks.example/T0KEN\n  channel: x\n", "channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(tt.config)
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, path, tt.want)
			}
			if strings.Contains(err.Error(), "T0KEN") {
				t.Errorf("error %q shows the URL", err)
			}
		})
	}
}

func TestConfigReadsURLAndKeyFromFilesAndFillsDefaults(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"url": "https://hooks.example/T0KEN\n", "key": "k\n",
		"notify.yaml": "targets:\n- name: ops\n  type: generic\n  urlFile: url\n  hmacKeyFile: key\n  syncs: {labelSelector: team=a}\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := LoadConfig(filepath.Join(dir, "notify.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tg := c.Targets[0]
	if tg.URL != "https://hooks.example/T0KEN" || string(tg.key) != "k" || c.Reminder.Duration != DefaultReminder ||
		c.DriftWindow.Duration != DefaultDriftWindow || !tg.wants(Failed, "x", map[string]string{"team": "a"}) ||
		tg.wants(Failed, "x", map[string]string{"team": "b"}) {
		t.Errorf("config %+v not read as written", c)
	}
}

func TestEventsBeyondTheQueueAreDroppedAndCountedWithoutBlocking(t *testing.T) {
	cfg := Config{Targets: []Target{{Name: "t", Type: TypeGeneric, URL: "http://127.0.0.1:1/"}}}
	if err := cfg.complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	d := NewDispatcher(cfg, Options{QueueSize: 2}) // not started: nothing drains the queue
	rec := Wrap(nopRecorder{}, d)
	done := make(chan struct{})
	go func() {
		for i := range 10 {
			fail(rec, fmt.Sprintf("failure %d", i))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Eventf blocked on a full queue")
	}
	if got := d.Dropped(); got != 8 {
		t.Errorf("dropped %d events, want the 8 beyond a queue of 2", got)
	}
}

func TestEventsAboutOtherObjectsOnlyReachTheRealRecorder(t *testing.T) {
	cfg := Config{Targets: []Target{{Name: "t", Type: TypeGeneric, URL: "http://127.0.0.1:1/"}}}
	if err := cfg.complete(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	d := NewDispatcher(cfg, Options{QueueSize: 1})
	var seen countingRecorder
	rec := Wrap(&seen, d)
	rec.Eventf(&corev1.ConfigMap{}, nil, corev1.EventTypeWarning, v1alpha1.ReasonDriftDetected, "Revert", "x")
	if seen != 1 || len(d.in) != 0 {
		t.Errorf("the real recorder saw %d events (want 1) and the dispatcher %d (want 0)", seen, len(d.in))
	}
	// A Sync's deletion reaches the dispatcher only to forget the Sync: it
	// sends nothing.
	rec.Eventf(syncObj(), nil, corev1.EventTypeNormal, v1alpha1.ReasonDeleted, "Delete", "gone")
	if len(d.in) != 1 {
		t.Fatalf("the dispatcher got %d notices of a Sync's deletion, want 1", len(d.in))
	}
	if n := <-d.in; seen != 2 || !n.gone || len(d.dedup.observe(n, time.Now())) != 0 {
		t.Errorf("the real recorder saw %d events (want 2); the deletion became notice %+v sending a message, want a silent one forgetting the Sync", seen, n)
	}
}

type countingRecorder int

func (c *countingRecorder) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) { *c++ }
