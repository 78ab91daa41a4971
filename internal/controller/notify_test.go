package controller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/notify"
)

// TestARepeatedFailureNotifiesOnceAndItsFixOnceMore runs the agent with a
// generic notification target: a bad commit that fails twice with the
// same error sends one failure, and the fixing commit one recovery.
func TestARepeatedFailureNotifiesOnceAndItsFixOnceMore(t *testing.T) {
	h := newHarness(t)
	notifications, received := genericEndpoint(t, h.ns, "test-key")
	startAgentWith(t, func(o *Options) { o.Notify = notifications })

	h.repo.Commit(t, "bad", map[string]string{
		"good.yaml":   configMap("good", "v1"),
		"broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: [unclosed\n",
	})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Second} })
	eventually(t, "two failed syncs of the bad commit", func() bool {
		failed := 0
		for _, r := range h.syncNow("fleet").Status.History {
			if r.Result == v1alpha1.ResultFailed {
				failed++
			}
		}
		return failed >= 2
	})
	fixed := h.repo.Commit(t, "fix", map[string]string{"broken.yaml": configMap("x", "v1")})
	h.waitReady("fleet", fixed)
	eventually(t, "the recovered message", func() bool {
		b := received()
		return len(b) > 0 && b[len(b)-1].Event == notify.Recovered
	})

	var events []string
	for _, b := range received() {
		events = append(events, string(b.Event))
	}
	if strings.Join(events, ",") != "failed,recovered" {
		t.Fatalf("the endpoint received %v, want one failed and one recovered", events)
	}
	b := received()
	if b[0].Sync != "fleet" || b[0].Namespace != h.ns || b[0].Reason != v1alpha1.ReasonBuildFailed ||
		!strings.Contains(b[0].Message, "broken.yaml") || b[0].Revision == "" {
		t.Errorf("failure message %+v does not say which Sync, why, where and at which revision", b[0])
	}
	if b[1].Revision != fixed {
		t.Errorf("recovered at revision %q, want the fix %s", b[1].Revision, fixed)
	}
	if b[0].Subject != "bad" || b[0].Author == "" || b[1].Subject != "fix" {
		t.Errorf("messages name commits %q by %q and %q, want the subjects bad and fix, and an author", b[0].Subject, b[0].Author, b[1].Subject)
	}
}

// TestEachCommitGetsItsDeployStatus runs the agent with a GitHub commit
// status target: a good commit is marked pending, then success; a broken
// one failure, naming the file.
func TestEachCommitGetsItsDeployStatus(t *testing.T) {
	type status struct {
		path string
		body notify.StatusBody
	}
	var mu sync.Mutex
	var got []status
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body notify.StatusBody
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		if a := r.Header.Get("Authorization"); a != "Bearer ghp-test-token" {
			t.Errorf("Authorization %q, want the token as Bearer", a)
		}
		mu.Lock()
		got = append(got, status{r.URL.Path, body})
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	statusesOf := func(sha string) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, s := range got {
			if s.path == "/repos/org/fleet/statuses/"+sha {
				out = append(out, s.body.State+": "+s.body.Description)
			}
		}
		return out
	}

	h := newHarness(t)
	startAgentWithStatuses(t, h, srv.URL)

	good := h.repo.Commit(t, "good", map[string]string{"good.yaml": configMap("good", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		s.Annotations = map[string]string{v1alpha1.CommitStatusRepositoryAnnotation: "org/fleet"}
	})
	h.waitReady("fleet", good)
	eventually(t, "pending then success on the good commit", func() bool { return len(statusesOf(good)) == 2 })
	if s := statusesOf(good); !strings.HasPrefix(s[0], "pending: syncing "+good[:7]) || !strings.HasPrefix(s[1], "success: Ready: applied "+good[:7]) {
		t.Errorf("statuses on the good commit %q, want pending then success, saying what was applied", s)
	}
	mu.Lock()
	if c := got[0].body.Context; c != "driftless/test-cluster/"+h.ns+"/fleet" {
		t.Errorf("context %q, want driftless/<cluster>/<namespace>/<name>", c)
	}
	mu.Unlock()

	bad := h.repo.Commit(t, "bad", map[string]string{"broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: [unclosed\n"})
	h.requestSync("fleet")
	eventually(t, "failure on the broken commit", func() bool {
		s := statusesOf(bad)
		return len(s) > 0 && strings.HasPrefix(s[len(s)-1], "failure: ")
	})
	s := statusesOf(bad)
	if len(s) != 2 || !strings.HasPrefix(s[0], "pending: ") || !strings.Contains(s[1], "BuildFailed: ") || !strings.Contains(s[1], "broken.yaml") {
		t.Errorf("statuses on the broken commit %q, want pending, then one failure naming BuildFailed and broken.yaml", s)
	}
}

// startAgentWithStatuses starts the agent with a GitHub commit status
// target at address (token ghp-test-token, cluster test-cluster) for the
// Syncs of h's namespace.
func startAgentWithStatuses(t *testing.T, h *harness, address string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("ghp-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "targets:\n- name: github\n  type: github-status\n  address: " + address + "\n  tokenFile: token\n  syncs:\n    namespaces: [" + h.ns + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "notify.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	notifications, err := notify.LoadConfig(filepath.Join(dir, "notify.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	notifications.Cluster = "test-cluster"
	startAgentWith(t, func(o *Options) { o.Notify = notifications })
}

// TestTheNotificationStateIsKeptInAConfigMap saves and reads the dedup
// state through notify.ConfigMapState on the real API server: created
// once, then updated.
func TestTheNotificationStateIsKeptInAConfigMap(t *testing.T) {
	ns := env.Namespace(t)
	state := &notify.ConfigMapState{Reader: c, Writer: c, Key: client.ObjectKey{Namespace: ns, Name: "driftless-notify-state"}}
	ctx := context.Background()
	if data, err := state.Load(ctx); err != nil || data != nil {
		t.Fatalf("before any save: %q, %v; want nothing", data, err)
	}
	for _, want := range []string{`{"failing":[]}`, `{"statuses":[]}`} {
		if err := state.Save(ctx, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if data, err := state.Load(ctx); err != nil || string(data) != want {
			t.Errorf("loaded %q, %v; want what was saved, %s", data, err, want)
		}
	}
}
