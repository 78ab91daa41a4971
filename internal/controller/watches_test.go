package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/driftless/driftless/internal/drift"
)

// startWatches runs the drift controller's watches in a manager of the
// agent's own identity until the test ends.
func startWatches(t *testing.T) *Watches {
	t.Helper()
	mgr := newAgentManager(t)
	w, err := SetupDriftWithManager(mgr, &DriftReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Store: NewStore()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// As in the agent, syncs start watches once the drift controller
	// runs: a source started with the controller says when.
	running := make(chan struct{})
	if err := w.ctrl.Watch(source.TypedFunc[drift.Request](func(context.Context, queue) error {
		close(running)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the drift controller did not start")
	}
	return w
}

func (w *Watches) started() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.starts
}

// A kind whose watch cannot list (here: its API is not served, as after
// its CRD was deleted) is waited for once; the syncs after it go on at
// once, say that it is not watched and when the next try is, and watch
// the other kinds.
func TestAKindThatCannotBeWatchedIsNotWaitedForAgainUntilItsBackOffPasses(t *testing.T) {
	w := startWatches(t)
	// Not a timing under test: the wait the first sync makes, shortened.
	w.syncTimeout = 2 * time.Second
	missing := schema.GroupVersionKind{Group: "refused.driftless.test", Version: "v1", Kind: "Unserved"}
	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	kinds := []schema.GroupVersionKind{missing, configMaps}

	err := w.Ensure(context.Background(), kinds, time.Now())
	if err == nil || !strings.Contains(err.Error(), "Unserved") || !strings.Contains(err.Error(), "next try at") {
		t.Fatalf("first sync: want an error naming Unserved and the next try, got %v", err)
	}
	if got := w.started(); got != 2 {
		t.Fatalf("first sync started %d watches, want 2", got)
	}
	if !w.Covers([]schema.GroupVersionKind{configMaps}) || w.Covers(kinds) {
		t.Fatal("ConfigMaps should be watched, Unserved not")
	}

	err = w.Ensure(context.Background(), kinds, time.Now())
	if err == nil || !strings.Contains(err.Error(), "Unserved is not watched") || !strings.Contains(err.Error(), "next try at") {
		t.Fatalf("second sync: want %q and the next try, got %v", "Unserved is not watched", err)
	}
	if got := w.started(); got != 2 {
		t.Fatalf("the second sync started a watch again (%d started, want 2): it waited for Unserved again", got)
	}
}

// A sync cancelled (the agent stopping) during the wait for a watch that
// cannot list returns its worker at once, and the kind is tried again at
// the next sync: it was not refused, only not waited for to the end.
func TestTheWaitForAWatchEndsWithTheSync(t *testing.T) {
	w := startWatches(t)
	w.syncTimeout = 10 * time.Minute
	missing := []schema.GroupVersionKind{{Group: "refused.driftless.test", Version: "v1", Kind: "Unserved"}}

	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- w.Ensure(ctx, missing, time.Now()) }()
	eventually(t, "the watch to start", func() bool { return w.started() == 1 })
	cancel()
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("a cancelled wait reported the kind watched")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sync's worker was still waiting for the watch 30 s after the sync was cancelled")
	}

	w.syncTimeout = time.Second
	_ = w.Ensure(context.Background(), missing, time.Now())
	if got := w.started(); got != 2 {
		t.Fatalf("after a cancelled wait the next sync started %d watches in all, want 2 (it tries again)", got)
	}
}
