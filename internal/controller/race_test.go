package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// raceIterations is how many commits TestPruneChangeAndRecreateNeverComeBack
// makes; the race it guards against showed in 2 of 7 single runs.
const raceIterations = 50

// TestPruneChangeAndRecreateNeverComeBack runs the real agent — Sync and
// drift controllers, watches on — while commits prune, change and force a
// re-creation of objects of several kinds (a custom resource, a Role
// whose name holds "_" and ":", ConfigMaps), and while someone keeps
// editing an object of another Sync by hand. Nothing the first Sync
// pruned may come back, and no object of it may be "reverted": nobody
// edits it but git, so any revert would be to an older render.
func TestPruneChangeAndRecreateNeverComeBack(t *testing.T) {
	h := newHarness(t)
	h.tenantMayWriteClusterWide() // its git holds a CRD
	group := "race" + strings.ReplaceAll(h.ns, "-", "") + ".example.com"
	t.Cleanup(func() {
		if crd := get(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets."+group); crd != nil {
			_ = c.Delete(context.Background(), crd)
		}
	})
	crd := testenv.CRDManifest(group, "Gadget", "gadgets")
	gadget := func(i int) string {
		return fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata:\n  name: g-%d\nspec:\n  size: %d\n", group, i, i)
	}
	role := func(i int) string {
		return fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: \"team_a:reader-%d\"\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get]\n", i)
	}
	frozen := func(v int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen\n  annotations:\n    driftless.dev/force: enabled\nimmutable: true\ndata:\n  v: %q\n", fmt.Sprint(v))
	}
	files := func(i int) map[string]string {
		f := map[string]string{
			"crd.yaml":                  crd,
			fmt.Sprintf("g-%d.yaml", i): gadget(i),
			fmt.Sprintf("r-%d.yaml", i): role(i),
			"counter.yaml":              configMap("counter", fmt.Sprint(i)),
			"frozen.yaml":               frozen(i / 3), // re-created every third commit
		}
		if i > 0 {
			f[fmt.Sprintf("g-%d.yaml", i-1)] = "" // pruned
			f[fmt.Sprintf("r-%d.yaml", i-1)] = ""
		}
		return f
	}

	// The second Sync, edited by hand all along, keeps the drift
	// controller busy and proves it is reverting while the first churns.
	// Each edit hits another of its ConfigMaps, rarely enough that the
	// fight back-off never pauses the reverts; the last one is kept for a
	// final edit.
	const handObjects = 100
	handFiles := map[string]string{}
	for i := range handObjects {
		handFiles[fmt.Sprintf("h-%d.yaml", i)] = configMap(fmt.Sprintf("h-%d", i), "git")
	}
	hand := h.srv.NewRepo(t, "hand")
	handRev := hand.Commit(t, "hand", handFiles)
	handSync := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "hand", Namespace: h.ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: hand.FileURL(), Branch: "main"}},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: h.ns,
		},
	}
	if err := c.Create(context.Background(), handSync); err != nil {
		t.Fatal(err)
	}
	handEdit := func(ctx context.Context, name, value string) error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, &cm); err != nil {
			return err
		}
		cm.Data["key"] = value
		return c.Update(ctx, &cm, client.FieldOwner("kubectl-edit"))
	}

	rev := h.repo.Commit(t, "commit 0", files(0))
	h.createSync("churn", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: 200 * time.Millisecond} })
	startAgentWith(t, func(o *Options) { o.Concurrency = 4 })
	h.waitReady("hand", handRev)
	h.waitReady("churn", rev)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_ = handEdit(ctx, fmt.Sprintf("h-%d", i%(handObjects-1)), fmt.Sprintf("by hand %d", i))
			select {
			case <-ctx.Done():
			case <-time.After(700 * time.Millisecond):
			}
		}
	}()

	for i := 1; i <= raceIterations; i++ {
		rev = h.repo.Commit(t, fmt.Sprintf("commit %d", i), files(i))
		h.waitReady("churn", rev)
	}
	stop()
	wg.Wait()

	// One more hand edit, reverted: the drift queue has caught up with
	// every event of the churn before it.
	last := fmt.Sprintf("h-%d", handObjects-1)
	if err := handEdit(context.Background(), last, "by hand, last"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the last hand edit reverted", func() bool {
		return get(t, "v1", "ConfigMap", h.ns, last).Object["data"].(map[string]any)["key"] == "git"
	})

	for i := 0; i < raceIterations; i++ {
		if g := get(t, group+"/v1", "Gadget", h.ns, fmt.Sprintf("g-%d", i)); g != nil {
			t.Errorf("Gadget g-%d was pruned and came back (created by %v)", i, managers(g))
		}
		if r := get(t, "rbac.authorization.k8s.io/v1", "Role", h.ns, fmt.Sprintf("team_a:reader-%d", i)); r != nil {
			t.Errorf("Role team_a:reader-%d was pruned and came back", i)
		}
	}
	if get(t, group+"/v1", "Gadget", h.ns, fmt.Sprintf("g-%d", raceIterations)) == nil {
		t.Errorf("Gadget g-%d of the last commit is missing", raceIterations)
	}
	if v := get(t, "v1", "ConfigMap", h.ns, "counter"); v == nil || v.Object["data"].(map[string]any)["key"] != fmt.Sprint(raceIterations) {
		t.Errorf("ConfigMap counter = %v, want the last commit's %d", v, raceIterations)
	}
	if v := get(t, "v1", "ConfigMap", h.ns, "frozen"); v == nil || v.Object["data"].(map[string]any)["v"] != fmt.Sprint(raceIterations/3) {
		t.Errorf("ConfigMap frozen = %v, want the last commit's %d", v, raceIterations/3)
	}
	churn := h.syncNow("churn")
	for _, inc := range churn.Status.Drift {
		t.Errorf("the churning Sync, which nobody edits, recorded drift: %s %s: %s", inc.Action, inc.Object, inc.Message)
	}
	var events corev1.EventList
	if err := c.List(context.Background(), &events, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == v1alpha1.ReasonDriftReverted && strings.Contains(e.Message, "re-created it") {
			t.Errorf("an object was re-created by a drift check: %s %s", e.InvolvedObject.Name, e.Message)
		}
	}
	if inv := listed(t, churn); len(inv) != 5 {
		t.Errorf("churn inventory has %d entries, want 5 (CRD, Gadget, Role, two ConfigMaps): %v", len(inv), inv)
	}
	handNow := h.syncNow("hand")
	reverted := 0
	for _, inc := range handNow.Status.Drift {
		if inc.Action == v1alpha1.DriftReverted {
			reverted++
		}
	}
	if reverted == 0 {
		t.Error("the hand-edited Sync recorded no revert: the drift controller was not reverting")
	}
}

// managers lists the field managers of u, to tell who wrote it.
func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, m := range u.GetManagedFields() {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	return out
}
