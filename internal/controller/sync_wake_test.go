package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// A push notice wakes every Sync of the repository; the one whose file
// the commit changed is synced first, even though it was woken last and
// its previous sync was the latest, and the others then record the new
// revision. The notice costs one ls-remote, not one per Sync.
func TestAWokenSyncWhosePathsChangedIsSyncedBeforeTheOthers(t *testing.T) {
	h := newHarness(t)
	const apps = 8
	wake := make(chan WakeUp)
	// Created last, app-0 is also the last synced, so that an
	// unordered queue would take it last.
	appSyncs(h, apps, true, wake)

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
		woken = append(woken, h.syncNow(appName(i)))
	}
	uploadPacks := h.repo.UploadPacks()
	second := h.repo.Commit(t, "app-0: v2", map[string]string{appName(0) + ".yaml": configMap(appName(0), "v2")})
	notice := time.Now()
	for _, s := range woken {
		wake <- WakeUp{Sync: s, Notice: notice}
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
	if order[0] != appName(0) {
		t.Errorf("Syncs recorded %s in the order %q; want %s, whose file changed, first", second[:7], order, appName(0))
	}
	// However the wake-ups split into batches on a loaded machine, the
	// notice is answered by one ls-remote (and the commit fetched once).
	if got := h.repo.UploadPacks() - uploadPacks; got != 2 {
		t.Errorf("a notice that woke %d Syncs of one branch cost the git host %d upload-packs, want 2: one ls-remote, one fetch", apps, got)
	}
	if got := get(t, "v1", "ConfigMap", h.ns, appName(0)); got == nil || got.Object["data"].(map[string]any)["key"] != "v2" {
		t.Errorf("ConfigMap %s was not updated: %v", appName(0), got)
	}
}

// The wake-ups of one push notice may reach the Sync controller apart (a
// loaded machine, a receiver that hands a thousand Syncs over one by
// one): those that come after the first ls-remote for the notice began
// are answered by it, so the notice costs the git host one ls-remote
// whatever the batches.
func TestAPushNoticeCostsOneLsRemoteWhenItsWakeUpsArriveApart(t *testing.T) {
	h := newHarness(t)
	const apps = 4
	wake := make(chan WakeUp)
	appSyncs(h, apps, false, wake)
	var woken []*v1alpha1.Sync
	for i := range apps {
		woken = append(woken, h.syncNow(appName(i)))
	}
	uploadPacks := h.repo.UploadPacks()
	second := h.repo.Commit(t, "app-0: v2", map[string]string{appName(0) + ".yaml": configMap(appName(0), "v2")})
	notice := time.Now()
	// The notice's first half, synced, then its second half: a lull far
	// longer than any batch waits for.
	for half := range 2 {
		for _, s := range woken[half*apps/2 : (half+1)*apps/2] {
			wake <- WakeUp{Sync: s, Notice: notice}
		}
		for _, s := range woken[half*apps/2 : (half+1)*apps/2] {
			h.waitReady(s.Name, second)
		}
	}
	if got := h.repo.UploadPacks() - uploadPacks; got != 2 {
		t.Errorf("a notice that woke %d Syncs of one branch in two batches cost the git host %d upload-packs, want 2: one ls-remote, one fetch", apps, got)
	}
}

func appName(i int) string { return fmt.Sprintf("app-%d", i) }

// appSyncs commits one ConfigMap per app (app-0.yaml, …), starts an agent
// woken through wake, and creates a Sync of each app's file over SSH (an
// hour's interval), app-0 first unless reverse, each Ready before the
// next. The git server counts what the agent asks of the repository,
// whatever other tests' Syncs the agent syncs meanwhile.
func appSyncs(h *harness, apps int, reverse bool, wake <-chan WakeUp) {
	h.t.Helper()
	files := map[string]string{}
	for i := range apps {
		files[appName(i)+".yaml"] = configMap(appName(i), "v1")
	}
	first := h.repo.Commit(h.t, "initial", files)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: h.ns},
		Data:       map[string][]byte{"identity": h.srv.DeployKey, "known_hosts": h.srv.KnownHosts()},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		h.t.Fatal(err)
	}
	startAgentWith(h.t, func(o *Options) { o.Wake = wake })
	for n := range apps {
		i := n
		if reverse {
			i = apps - 1 - n
		}
		h.createSync(appName(i), func(s *v1alpha1.Sync) {
			s.Spec.Source.Git.URL = h.repo.SSHURL()
			s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git"}
			s.Spec.Paths = []string{appName(i) + ".yaml"}
			s.Spec.Interval.Duration = time.Hour
		})
		h.waitReady(appName(i), first)
	}
}
