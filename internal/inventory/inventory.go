package inventory

import (
	"errors"
	"fmt"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
)

// FromStatus reads a Sync's status.inventory, where agents before the
// Inventory kind listed what it applied. Entries it cannot parse are
// left out, so they are never pruned, and returned joined in the error;
// the entries it could read are returned either way.
func FromStatus(st *v1alpha1.SyncStatus) ([]plan.Entry, error) {
	return fromList(st.Inventory)
}

func fromList(list []v1alpha1.InventoryEntry) ([]plan.Entry, error) {
	entries := make([]plan.Entry, 0, len(list))
	var errs []error
	for _, e := range list {
		id, err := Decode(e.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries = append(entries, plan.Entry{ID: id, Version: e.Version, Wave: e.Wave})
	}
	if len(errs) > 0 {
		return entries, fmt.Errorf("%d inventory entries cannot be read and are never pruned: %w", len(errs), errors.Join(errs...))
	}
	return entries, nil
}

// ToStatus is the listed form of entries (Inventory.entries), in their
// order.
func ToStatus(entries []plan.Entry) []v1alpha1.InventoryEntry {
	out := make([]v1alpha1.InventoryEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, v1alpha1.InventoryEntry{ID: Encode(e.ID), Version: e.Version, Wave: e.Wave})
	}
	return out
}

// Union returns a ∪ b by ID, a's entries first; for an ID in both, b's
// entry (the newer version and wave) wins.
func Union(a, b []plan.Entry) []plan.Entry {
	at := make(map[plan.ID]int, len(a)+len(b))
	out := make([]plan.Entry, 0, len(a)+len(b))
	for _, list := range [][]plan.Entry{a, b} {
		for _, e := range list {
			if i, ok := at[e.ID]; ok {
				out[i] = e
				continue
			}
			at[e.ID] = len(out)
			out = append(out, e)
		}
	}
	return out
}

// Touched returns the entries of p's inventory whose object appears in cs:
// what a partial apply wrote (or found already in place).
func Touched(cs apply.ChangeSet, p plan.Plan) []plan.Entry {
	changed := make(map[plan.ID]bool, len(cs))
	for _, c := range cs {
		changed[c.ID] = true
	}
	var out []plan.Entry
	for _, e := range p.Inventory() {
		if changed[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

// FailedPrunes returns the entries whose deletion failed in err (as
// returned by apply.Manager.Prune): they stay in the inventory so that
// the next sync tries again.
func FailedPrunes(entries []plan.Entry, err error) []plan.Entry {
	failed := map[plan.ID]bool{}
	for _, id := range apply.FailedIDs(err) {
		failed[id] = true
	}
	var out []plan.Entry
	for _, e := range entries {
		if failed[e.ID] {
			out = append(out, e)
		}
	}
	return out
}
