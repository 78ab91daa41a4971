package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/plan"
)

// storedSize is the size of the Sync as the API server stores and sends
// it: what every write of its status (a drift incident's included) costs
// the API server to decode, validate, store and send to each watcher.
func storedSize(t *testing.T, s *v1alpha1.Sync) int {
	t.Helper()
	var got v1alpha1.Sync
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&got)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func TestTheSyncStaysTheSameSizeWhateverItManages(t *testing.T) {
	h := newHarness(t)
	// Both more than a sync record lists (v1alpha1.MaxRecordChanges).
	const few, many = v1alpha1.MaxRecordChanges + 5, 300
	files := map[string]string{}
	for i := range many {
		name := fmt.Sprintf("large-%03d", i)
		files["large/"+name+".yaml"] = configMap(name, "v1")
		if i < few {
			name := fmt.Sprintf("small-%03d", i)
			files["small/"+name+".yaml"] = configMap(name, "v1")
		}
	}
	h.repo.Commit(t, "two apps", files)
	h.createSync("small", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"small"} })
	h.createSync("large", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"large"} })
	small, large := h.reconcile("small"), h.reconcile("large")
	h.expectReady(small)
	h.expectReady(large)

	if inv := listed(t, large); len(inv) != many || large.Status.InventoryRef == nil ||
		*large.Status.InventoryRef != (v1alpha1.InventoryRef{Name: "large", Entries: many}) {
		t.Errorf("the Inventory lists %d objects and the status points at %+v; want %d, and {large %d}", len(inv), large.Status.InventoryRef, many, many)
	}
	// The two statuses differ by their names and counts, not by 275
	// inventory entries (more than 12 KiB).
	if s, l := storedSize(t, small), storedSize(t, large); l-s > 512 {
		t.Errorf("a Sync of %d objects is stored in %d bytes, one of %d in %d: its status grows with what it manages", many, l, few, s)
	}
}

func TestASyncWhoseStatusListsTheInventoryHasItMovedAndStillPrunesFromIt(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "three", map[string]string{
		"app/a.yaml": configMap("a", "v1"), "app/b.yaml": configMap("b", "v1"), "app/stale.yaml": configMap("stale", "v1"),
	})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	h.expectReady(h.reconcile("fleet"))

	// As an agent before the Inventory kind left it: the inventory in the
	// status (legacy IDs), no Inventory.
	s := h.reconcile("fleet")
	if err := c.Delete(context.Background(), &v1alpha1.Inventory{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	base := s.DeepCopy()
	s.Status.InventoryRef = nil
	s.Status.Inventory = nil
	for _, name := range []string{"a", "b", "stale"} {
		s.Status.Inventory = append(s.Status.Inventory, v1alpha1.InventoryEntry{ID: h.ns + "_" + name + "__ConfigMap", Version: "v1"})
	}
	if err := c.Status().Patch(context.Background(), s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}

	// The agent, upgraded (nothing in memory), with stale dropped from git.
	h.r.Store = NewStore()
	h.repo.Commit(t, "drop stale", map[string]string{"app/stale.yaml": ""})
	s = h.reconcile("fleet")
	h.expectReady(s)
	if get(t, "v1", "ConfigMap", h.ns, "stale") != nil {
		t.Error("ConfigMap stale, listed only in the status's inventory and dropped from git, was not pruned")
	}
	inv := listed(t, s) // and status.inventory is empty
	if len(inv) != 2 || s.Status.InventoryRef == nil || s.Status.InventoryRef.Entries != 2 {
		t.Errorf("the Inventory lists %+v and the status points at %+v; want a and b, and 2 entries", inv, s.Status.InventoryRef)
	}
}

func TestAnInventoryOfAnEarlierSyncOfTheSameNameIsNotRead(t *testing.T) {
	h := newHarness(t)
	h.createSync("fleet", nil)
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "fleet"}, &s); err != nil {
		t.Fatal(err)
	}
	earlier := s.DeepCopy()
	earlier.UID = "uid-of-a-deleted-sync"
	leftover := inventory.Object(earlier, []plan.Entry{{ID: plan.ID{Kind: "ConfigMap", Namespace: h.ns, Name: "not-mine"}, Version: "v1"}}, nil)
	if err := c.Create(context.Background(), leftover); err != nil {
		t.Fatal(err)
	}
	entries, unreadable, err := inventory.Read(context.Background(), c, &s)
	if err != nil || unreadable != nil || len(entries) != 0 {
		t.Errorf("Read = %v, %v, %v; want nothing: the Inventory is another Sync's", entries, unreadable, err)
	}
}

func TestObjectsAnAgentRolledBackToCreatedArePrunedAfterTheUpgradeAgain(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "two", map[string]string{"app/a.yaml": configMap("a", "v1"), "app/b.yaml": configMap("b", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	h.expectReady(h.reconcile("fleet"))
	before := listed(t, h.reconcile("fleet")) // the Inventory as the upgrade left it

	// Rolled back: the earlier agent, which knows no Inventory, creates
	// rollback-era and lists all three in status.inventory.
	h.repo.Commit(t, "one more", map[string]string{"app/rollback-era.yaml": configMap("rollback-era", "v1")})
	s := h.reconcile("fleet")
	var inv v1alpha1.Inventory
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "fleet"}, &inv); err != nil {
		t.Fatal(err)
	}
	inv.Entries, inv.EntryCount = before, len(before)
	if err := c.Update(context.Background(), &inv); err != nil {
		t.Fatal(err)
	}
	base := s.DeepCopy()
	s.Status.Inventory = nil
	for _, name := range []string{"a", "b", "rollback-era"} {
		s.Status.Inventory = append(s.Status.Inventory, v1alpha1.InventoryEntry{ID: h.ns + "_" + name + "__ConfigMap", Version: "v1"})
	}
	if err := c.Status().Patch(context.Background(), s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}

	// Upgraded again (nothing in memory), with rollback-era dropped from git.
	h.r.Store = NewStore()
	h.repo.Commit(t, "drop it", map[string]string{"app/rollback-era.yaml": ""})
	s = h.reconcile("fleet")
	h.expectReady(s)
	if get(t, "v1", "ConfigMap", h.ns, "rollback-era") != nil {
		t.Error("ConfigMap rollback-era, created by the rolled-back agent and dropped from git, was not pruned")
	}
	if got := listed(t, s); len(got) != 2 || s.Status.InventoryRef == nil || s.Status.InventoryRef.Entries != 2 {
		t.Errorf("the Inventory lists %+v and the status points at %+v; want a and b, and 2 entries", got, s.Status.InventoryRef)
	}
}

func deleteInventory(t *testing.T, namespace, name string) {
	t.Helper()
	if err := c.Delete(context.Background(), &v1alpha1.Inventory{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func TestAnInventoryDeletedByHandIsWrittenAgainFromWhatTheAgentRead(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "two", map[string]string{"app/a.yaml": configMap("a", "v1"), "app/b.yaml": configMap("b", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	h.expectReady(h.reconcile("fleet"))
	deleteInventory(t, h.ns, "fleet")

	// The same agent, with nothing new in git: the Inventory comes back,
	// so a restart after it still knows what to prune.
	s := h.reconcile("fleet")
	h.expectReady(s)
	if got := listed(t, s); len(got) != 2 {
		t.Errorf("after the Inventory was deleted and the Sync synced again, it lists %+v; want a and b", got)
	}
}

func TestASyncWhoseInventoryWentMissingSaysSoAndStillApplies(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "two", map[string]string{"app/a.yaml": configMap("a", "v1"), "app/b.yaml": configMap("b", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	h.expectReady(h.reconcile("fleet"))
	deleteInventory(t, h.ns, "fleet")

	// Restarted (nothing in memory), with a new object in git.
	h.r.Store = NewStore()
	h.repo.Commit(t, "one more", map[string]string{"app/c.yaml": configMap("c", "v1")})
	s := h.reconcile("fleet")
	h.expectReady(s)
	if get(t, "v1", "ConfigMap", h.ns, "c") == nil {
		t.Error("ConfigMap c was not applied")
	}
	if msg := ready(s).Message; !strings.Contains(msg, "Inventory "+h.ns+"/fleet is missing") || !strings.Contains(msg, "cannot be pruned") {
		t.Errorf("Ready says %q; want it to tell that the Inventory is missing and what cannot be pruned", msg)
	}
	eventsFor(t, h.ns, "fleet", "cannot be pruned until deleted by hand")
	if got := listed(t, s); len(got) != 3 {
		t.Errorf("the Inventory lists %+v; want a, b and c, written again", got)
	}
}

// watchingAll is a Watches that covers every kind.
type watchingAll struct{}

func (watchingAll) Ensure(context.Context, client.ObjectKey, []schema.GroupVersionKind, time.Time) error {
	return nil
}
func (watchingAll) Release(client.ObjectKey)                      {}
func (watchingAll) Covers([]schema.GroupVersionKind) bool         { return true }
func (watchingAll) NotWatched([]schema.GroupVersionKind) []string { return nil }

func TestASyncThatDidNotMoveTheStatusInventoryDoesNotRewriteItsStatus(t *testing.T) {
	h := newHarness(t)
	h.r.Watches = watchingAll{}
	h.repo.Commit(t, "one", map[string]string{"app/a.yaml": configMap("a", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	s := h.reconcile("fleet")
	h.expectReady(s)
	base := s.DeepCopy()
	s.Status.Inventory = []v1alpha1.InventoryEntry{{ID: h.ns + "_a__ConfigMap", Version: "v1"}}
	if err := c.Status().Patch(context.Background(), s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}

	// Nothing new in git and every kind watched: the sync compares
	// nothing and moves nothing, so there is nothing to record.
	if after := h.reconcile("fleet"); after.ResourceVersion != s.ResourceVersion {
		t.Errorf("a sync that moved nothing rewrote the Sync's status (resourceVersion %s → %s)", s.ResourceVersion, after.ResourceVersion)
	}
}
