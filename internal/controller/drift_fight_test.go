package controller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/notify"
)

// genericEndpoint is a generic notification target on loopback for the
// Syncs of namespace ns; with key, it signs with that HMAC key and the
// endpoint checks each signature. received returns what it got so far.
func genericEndpoint(t *testing.T, ns, key string) (notify.Config, func() []notify.GenericBody) {
	t.Helper()
	var mu sync.Mutex
	var got []notify.GenericBody
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body notify.GenericBody
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		if key != "" && r.Header.Get(notify.SignatureHeader) != notify.Sign([]byte(key), b) {
			t.Errorf("bad signature on %s", b)
		}
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := "targets:\n- name: ops\n  type: generic\n  url: " + srv.URL + "\n  syncs:\n    namespaces: [" + ns + "]\n"
	if key != "" {
		cfg += "  hmacKeyFile: key\n"
		if err := os.WriteFile(filepath.Join(dir, "key"), []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notify.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	notifications, err := notify.LoadConfig(filepath.Join(dir, "notify.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return notifications, func() []notify.GenericBody {
		mu.Lock()
		defer mu.Unlock()
		return append([]notify.GenericBody(nil), got...)
	}
}

// syncEvents returns the notes of the Events on Sync name with reason.
func syncEvents(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == v1alpha1.SyncKind && e.Regarding.Name == name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// One fight is one "paused" message, and the pause holds: hand edits of
// one ConfigMap, each reverted until the fight starts, then two more
// during the pause, give one paused notification and one FightDetected
// event on the Sync; a sync requested during the pause leaves the last
// edit in place, and the edit is put back once the pause ends.
func TestOneFightIsOnePausedMessageAndTheSyncKeepsThePause(t *testing.T) {
	h := newHarness(t)
	notifications, received := genericEndpoint(t, h.ns, "")
	rev := h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig, "shop/other.yaml": configMap("other", "v1")})
	h.createSync("default", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	const pause = 20 * time.Second
	startAgentWith(t, func(o *Options) {
		o.Notify = notifications
		o.DriftPolicy = drift.Policy{Window: 2 * time.Minute, MaxReverts: 3, Backoff: pause, MaxBackoff: pause}
	})
	h.waitReady("default", rev)

	for i, value := range []string{"EUR", "JPY", "GBP"} {
		patchCurrency(t, h.ns, value)
		eventually(t, "revert "+string(rune('1'+i)), func() bool { return currency(t, h.ns) == "USD" })
	}
	pausedIncidents := func() int {
		n := 0
		for _, inc := range h.syncNow("default").Status.Drift {
			if inc.Action == v1alpha1.DriftPaused {
				n++
			}
		}
		return n
	}
	patchCurrency(t, h.ns, "CHF")
	eventually(t, "the 4th edit left in place (Paused)", func() bool { return pausedIncidents() >= 1 })
	patchCurrency(t, h.ns, "SEK")
	eventually(t, "the 5th edit recorded (Paused)", func() bool { return pausedIncidents() >= 2 })
	pausedAt := time.Now()

	// A sync during the pause leaves the object as the other writer has it.
	requested := time.Now()
	h.requestSync("default")
	eventually(t, "the requested sync recorded", func() bool {
		hist := h.syncNow("default").Status.History
		return len(hist) > 0 && !hist[0].StartedAt.Time.Before(requested.Truncate(time.Second))
	})
	if got := currency(t, h.ns); got != "SEK" && time.Since(pausedAt) < pause {
		t.Errorf("CURRENCY = %s after a sync during the pause, want the 5th edit SEK left alone until the pause ends", got)
	}

	// Once the pause ends, the edit is put back.
	deadline := time.Now().Add(pause + 30*time.Second)
	for currency(t, h.ns) != "USD" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if got := currency(t, h.ns); got != "USD" {
		t.Fatalf("CURRENCY = %s after the pause ended, want USD from git", got)
	}

	var paused []notify.GenericBody
	for _, b := range received() {
		if b.Event == notify.Paused {
			paused = append(paused, b)
		}
	}
	if len(paused) != 1 {
		t.Errorf("%d paused notifications for one fight, want 1: %+v", len(paused), paused)
	}
	if notes := syncEvents(t, h.ns, "default", v1alpha1.ReasonFight); len(notes) != 1 {
		t.Errorf("%d %s events on the Sync for one fight, want 1: %q", len(notes), v1alpha1.ReasonFight, notes)
	}
}
