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
// revision. The notice costs one ls-remote, not one per Sync.
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
	agent := startAgentWith(t, func(o *Options) { o.Wake = wake })
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
	lsRemotes := agent.Mirror().Stats().Resolves
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
	// One batch resolves the branch once. A loaded machine (-race, CI)
	// may split the wake-ups into batches more than 20 ms apart, or run
	// a Sync's own follow-up reconcile meanwhile: a few ls-remotes, never
	// one per Sync (without the shared resolve the notice costs 9).
	if got := agent.Mirror().Stats().Resolves - lsRemotes; got < 1 || got > apps/2-1 {
		t.Errorf("a notice that woke %d Syncs of one branch cost %d ls-remotes, want 1 (%d at most on a loaded machine)", apps, got, apps/2-1)
	}
	if got := get(t, "v1", "ConfigMap", h.ns, name(0)); got == nil || got.Object["data"].(map[string]any)["key"] != "v2" {
		t.Errorf("ConfigMap %s was not updated: %v", name(0), got)
	}
}
