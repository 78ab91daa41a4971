package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/plan"
)

// inventoryOf returns what s applied: the Store's copy of its Inventory
// when this agent read or wrote it, else what inventory.Read finds (the
// Inventory, or the status.inventory of an earlier agent), kept in the
// Store from then on. unreadable joins entries that cannot be parsed;
// err is a failed read, after which the sync must not go on.
//
// The Store's copy is what makes a sync read what the previous one
// wrote: the cache may not have seen that write yet.
func (r *SyncReconciler) inventoryOf(ctx context.Context, s *v1alpha1.Sync) (entries []plan.Entry, unreadable, err error) {
	key := client.ObjectKeyFromObject(s)
	if entries, ok := r.Store.Inventory(key, s.UID); ok {
		return entries, nil, nil
	}
	entries, digests, found, unreadable, err := inventory.ReadOwned(ctx, r.Client, s)
	if err != nil {
		return nil, nil, err
	}
	if !found && s.Status.InventoryRef != nil && r.Reader != nil {
		// A Sync just moved to this agent's shard has its Inventory still
		// labelled with the old one, out of this cache: read it from the
		// API server (the next write relabels it).
		if entries, digests, found, unreadable, err = inventory.ReadOwned(ctx, r.Reader, s); err != nil {
			return nil, nil, err
		}
	}
	if !found && len(s.Status.Inventory) == 0 && s.Status.InventoryRef != nil && s.Status.InventoryRef.Entries > 0 {
		// Not silently empty: the next sync starts from nothing, and
		// whatever git dropped meanwhile stays.
		msg := missingInventory(s)
		log.FromContext(ctx).Info(msg)
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonInventoryMissing, "Sync", "%s", msg)
		r.lost.Store(key, msg)
	}
	r.Store.SetInventory(key, s.UID, entries, digests)
	return entries, unreadable, nil
}

// missingInventory tells that s's Inventory is gone while its status
// counts entries in it, and what to do.
func missingInventory(s *v1alpha1.Sync) string {
	return fmt.Sprintf("Inventory %s/%s is missing (deleted, or its owner reference removed) while status.inventoryRef counts %d entries: "+
		"objects removed from git before this sync cannot be pruned until deleted by hand; "+
		"list them with kubectl get <kind> -A -l driftless.dev/sync=%s.%s and delete those no longer in git (the Inventory is written again from this sync on)",
		s.Namespace, s.Name, s.Status.InventoryRef.Entries, s.Namespace, s.Name)
}

// takeLost returns, once, the note missingInventory left for key.
func (r *SyncReconciler) takeLost(key client.ObjectKey) string {
	if v, ok := r.lost.LoadAndDelete(key); ok {
		return v.(string)
	}
	return ""
}

// recordInventory adds entries to the Sync's Inventory before a sync's
// first write (engine.Input.Record): an agent killed in the middle of the
// sync then finds every object it may have written in the inventory, and
// prunes those the next revision drops. The digests of the objects it
// already listed stay as they were.
func (r *SyncReconciler) recordInventory(ctx context.Context, s *v1alpha1.Sync, entries []plan.Entry) error {
	previous, _, err := r.inventoryOf(ctx, s)
	if err != nil {
		return fmt.Errorf("record the inventory of Sync %s/%s: %w", s.Namespace, s.Name, err)
	}
	return r.saveInventory(ctx, s, inventory.Union(previous, entries), r.Store.Digests(client.ObjectKeyFromObject(s), s.UID))
}

// saveInventory makes the Sync's Inventory list entries with digests,
// with one server-side apply that creates it when it is not there yet; it
// writes nothing when the Store's copy already lists the same entries, in
// any order (a sync that added objects ends with the entries its
// write-ahead record listed, in the plan's order), with the same digests.
// The Sync's status is not touched: writeStatus points at the Inventory
// and counts it.
func (r *SyncReconciler) saveInventory(ctx context.Context, s *v1alpha1.Sync, entries []plan.Entry, digests inventory.Digests) error {
	key := client.ObjectKeyFromObject(s)
	if known, ok := r.Store.Inventory(key, s.UID); ok && sameEntries(known, entries) &&
		sameDigests(entries, r.Store.Digests(key, s.UID), digests) && r.hasInventory(ctx, s) {
		return nil
	}
	// Sent as the typed object's JSON and answered with metadata only: a
	// large Sync's Inventory as unstructured maps, both ways, was the
	// largest thing a first sync allocated after its writes.
	body, err := json.Marshal(inventory.Object(s, entries, digests))
	if err != nil {
		return err
	}
	written := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Inventory"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
	}
	if err := r.Client.Patch(ctx, written, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(apply.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("record the inventory of Sync %s/%s in Inventory %s/%s: %w", s.Namespace, s.Name, s.Namespace, s.Name, err)
	}
	r.Store.SetInventory(key, s.UID, slices.Clone(entries), digests)
	return nil
}

// hasInventory reports whether the cache still holds s's Inventory,
// controlled by s: one deleted by hand, by a foreground deletion of the
// Sync, or orphaned (owner reference removed) is written again from the
// Store's copy. A failed read counts as missing: the write is harmless.
func (r *SyncReconciler) hasInventory(ctx context.Context, s *v1alpha1.Sync) bool {
	var inv v1alpha1.Inventory
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, &inv)
	return err == nil && metav1.IsControlledBy(&inv, s)
}

// sameEntries reports whether a and b list the same entries, in any
// order.
func sameEntries(a, b []plan.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[plan.Entry]bool, len(a))
	for _, e := range a {
		in[e] = true
	}
	for _, e := range b {
		if !in[e] {
			return false
		}
	}
	return true
}
