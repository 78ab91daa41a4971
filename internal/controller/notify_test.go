package controller

import (
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

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/notify"
)

// TestARepeatedFailureNotifiesOnceAndItsFixOnceMore runs the agent with a
// generic notification target: a bad commit that fails twice with the
// same error sends one failure, and the fixing commit one recovery.
func TestARepeatedFailureNotifiesOnceAndItsFixOnceMore(t *testing.T) {
	var mu sync.Mutex
	var got []notify.GenericBody
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body notify.GenericBody
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		if r.Header.Get(notify.SignatureHeader) != notify.Sign([]byte("test-key"), b) {
			t.Errorf("bad signature on %s", b)
		}
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	received := func() []notify.GenericBody {
		mu.Lock()
		defer mu.Unlock()
		return append([]notify.GenericBody(nil), got...)
	}

	h := newHarness(t)
	dir := t.TempDir()
	cfg := "targets:\n- name: ops\n  type: generic\n  url: " + srv.URL + "\n  hmacKeyFile: key\n  syncs:\n    namespaces: [" + h.ns + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("test-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notify.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	notifications, err := notify.LoadConfig(filepath.Join(dir, "notify.yaml"))
	if err != nil {
		t.Fatal(err)
	}
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
}
