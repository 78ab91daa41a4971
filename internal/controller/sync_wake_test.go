package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/driftless/driftless/api/v1alpha1"
)

// A push notice wakes every Sync of the repository; the one whose file
// the commit changed is synced first, even though it was woken last and
// its previous sync was the latest, and the others then record the new
// revision.
func TestAWokenSyncWhosePathsChangedIsSyncedBeforeTheOthers(t *testing.T) {
	h := newHarness(t)
	const apps = 8
	name := func(i int) string { return fmt.Sprintf("app-%d", i) }
	files := map[string]string{}
	for i := range apps {
		files[name(i)+".yaml"] = configMap(name(i), "v1")
	}
	first := h.repo.Commit(t, "initial", files)
	wake := make(chan event.TypedGenericEvent[*v1alpha1.Sync])
	startAgentWith(t, func(o *Options) { o.Wake = wake })
	// Created last, app-0 is also the last synced, so that an
	// unordered queue would take it last.
	for i := apps - 1; i >= 0; i-- {
		h.createSync(name(i), func(s *v1alpha1.Sync) {
			s.Spec.Paths = []string{name(i) + ".yaml"}
			s.Spec.Interval.Duration = time.Hour
		})
		h.waitReady(name(i), first)
	}

	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := watcher.Watch(ctx, &v1alpha1.SyncList{}, client.InNamespace(h.ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Read first, so that the wake-ups come together as a receiver's do.
	var woken []*v1alpha1.Sync
	for i := apps - 1; i >= 0; i-- {
		woken = append(woken, h.syncNow(name(i)))
	}
	second := h.repo.Commit(t, "app-0: v2", map[string]string{name(0) + ".yaml": configMap(name(0), "v2")})
	for _, s := range woken {
		wake <- event.TypedGenericEvent[*v1alpha1.Sync]{Object: s}
	}
	var order []string
	for len(order) < apps {
		select {
		case <-ctx.Done():
			t.Fatalf("only %q recorded %s", order, second[:7])
		case e := <-w.ResultChan():
			s, ok := e.Object.(*v1alpha1.Sync)
			if e.Type != watch.Modified || !ok || s.Status.LastAppliedRevision != second || slices.Contains(order, s.Name) {
				continue
			}
			order = append(order, s.Name)
		}
	}
	if order[0] != name(0) {
		t.Errorf("Syncs recorded %s in the order %q; want %s, whose file changed, first", second[:7], order, name(0))
	}
	// How many ls-remotes the notice cost is not asserted here: on a
	// loaded CI machine a notice of 8 Syncs cost up to 6 (wake-ups split
	// into batches, follow-up reconciles); the sharing itself is tested
	// in internal/source (TestMirrorResolveSharesLsRemotesAmongConcurrentCallersAndNeverAnswersStale), and the bench
	// counts 1 for a notice to 1,000 Syncs.
	if got := get(t, "v1", "ConfigMap", h.ns, name(0)); got == nil || got.Object["data"].(map[string]any)["key"] != "v2" {
		t.Errorf("ConfigMap %s was not updated: %v", name(0), got)
	}
}
