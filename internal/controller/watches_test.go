package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
	"github.com/driftless/driftless/internal/testenv/apimetrics"
)

// holder is the Sync the watch tests hold kinds for.
var holder = client.ObjectKey{Namespace: "team", Name: "app"}

// startWatches runs the drift controller's watches in a manager of the
// agent's own identity until the test ends.
func startWatches(t *testing.T) *Watches {
	t.Helper()
	mgr := newAgentManager(t)
	w, err := SetupDriftWithManager(mgr, &DriftReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Store: NewStore()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)
	return w
}

// counts returns how many watches w started and stopped.
func (w *Watches) counts() (starts, stops int) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.starts, w.stops
}

func (w *Watches) startCount() int {
	starts, _ := w.counts()
	return starts
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

	err := w.Ensure(context.Background(), holder, kinds, time.Now())
	if err == nil || !strings.Contains(err.Error(), "Unserved") || !strings.Contains(err.Error(), "next try at") {
		t.Fatalf("first sync: want an error naming Unserved and the next try, got %v", err)
	}
	if got := w.startCount(); got != 2 {
		t.Fatalf("first sync started %d watches, want 2", got)
	}
	if !w.Covers([]schema.GroupVersionKind{configMaps}) || w.Covers(kinds) {
		t.Fatal("ConfigMaps should be watched, Unserved not")
	}

	err = w.Ensure(context.Background(), holder, kinds, time.Now())
	if err == nil || !strings.Contains(err.Error(), "Unserved is not watched") || !strings.Contains(err.Error(), "next try at") {
		t.Fatalf("second sync: want %q and the next try, got %v", "Unserved is not watched", err)
	}
	if got := w.startCount(); got != 2 {
		t.Fatalf("the second sync started a watch again (%d started, want 2): it waited for Unserved again", got)
	}

	// What the Sync's Ready condition says: the kind, its group and
	// version, and why, the same at each sync while it is refused (a
	// time in it would rewrite the status at every interval).
	notWatched := w.NotWatched(kinds)
	if len(notWatched) != 1 || !strings.HasPrefix(notWatched[0], "Unserved (refused.driftless.test/v1): ") {
		t.Fatalf("NotWatched = %q, want one entry for Unserved", notWatched)
	}
	if again := w.NotWatched(kinds); strings.Join(again, "|") != strings.Join(notWatched, "|") {
		t.Fatalf("NotWatched changed between two syncs: %q, then %q", notWatched, again)
	}
	msg := outcome{revision: "abc1234", unwatched: notWatched}.message()
	if !strings.Contains(msg, "not watched for drift") || !strings.Contains(msg, "put back at the interval") || !strings.Contains(msg, "Unserved (refused.driftless.test/v1)") {
		t.Fatalf("the Ready message does not say Unserved is not watched and what that means: %q", msg)
	}
	if got := w.NotWatched([]schema.GroupVersionKind{configMaps}); len(got) != 0 {
		t.Fatalf("ConfigMaps are watched, NotWatched says %q", got)
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
	go func() { returned <- w.Ensure(ctx, holder, missing, time.Now()) }()
	eventually(t, "the watch to start", func() bool { return w.startCount() == 1 })
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
	_ = w.Ensure(context.Background(), holder, missing, time.Now())
	if got := w.startCount(); got != 2 {
		t.Fatalf("after a cancelled wait the next sync started %d watches in all, want 2 (it tries again)", got)
	}
}

// A kind is watched while some Sync holds objects of it: once the last
// Sync with ServiceAccounts prunes them, the agent's watch of
// ServiceAccounts ends at the API server; once the Sync is deleted, its
// ConfigMaps' watch ends too; a Sync that holds ConfigMaps again is
// watched again, and a hand edit of its ConfigMap is put back.
func TestAKindNoSyncHoldsAnyMoreIsNoLongerWatched(t *testing.T) {
	h := newHarness(t)
	startAgentWith(t, func(*Options) {})
	base, err := apimetrics.Watching(context.Background(), env.Clientset)
	if err != nil {
		t.Fatal(err)
	}
	expectWatches := func(resource string, want int, what string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() string {
			open, err := apimetrics.Watching(context.Background(), env.Clientset)
			if err != nil {
				t.Fatal(err)
			}
			if got := open[resource] - base[resource]; got != want {
				return fmt.Sprintf("the agent holds %d watches of %s, want %d", got, resource, want)
			}
			return ""
		})
	}
	robot := "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: robot\n"
	first := h.repo.Commit(t, "app", map[string]string{"app/settings.yaml": configMap("settings", "v1"), "app/robot.yaml": robot})
	h.createSync("app", func(s *v1alpha1.Sync) { s.Spec.Interval.Duration = time.Hour })
	h.waitReady("app", first)
	expectWatches("serviceaccounts", 1, "a Sync holds a ServiceAccount")
	expectWatches("configmaps", 1, "a Sync holds a ConfigMap")

	second := h.repo.Commit(t, "app: no robot", map[string]string{"app/robot.yaml": ""})
	h.requestSync("app")
	h.waitReady("app", second)
	expectWatches("serviceaccounts", 0, "the Sync's ServiceAccount pruned")
	expectWatches("configmaps", 1, "the Sync still holds its ConfigMap")

	if err := c.Delete(context.Background(), h.syncNow("app")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Sync app gone", func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "app"}, &v1alpha1.Sync{}))
	})
	expectWatches("configmaps", 0, "the Sync deleted")

	h.createSync("again", func(s *v1alpha1.Sync) { s.Spec.Interval.Duration = time.Hour })
	h.waitReady("again", second)
	expectWatches("configmaps", 1, "another Sync holds a ConfigMap")
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["key"] = "by hand"
	if err := c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hand edit of ConfigMap settings put back", func() bool {
		got := get(t, "v1", "ConfigMap", h.ns, "settings")
		return got != nil && got.Object["data"].(map[string]any)["key"] == "v1"
	})
}
