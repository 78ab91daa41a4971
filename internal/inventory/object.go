package inventory

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
)

// Object is the Inventory of s that lists entries, in their order, with
// what digests knows of them: s's namespace and name, controlled by s so
// that it goes when s does, and labelled with s's shard
// (driftless.dev/sync-shard) when s has one, so that only that shard's
// agents cache it.
func Object(s *v1alpha1.Sync, entries []plan.Entry, digests Digests) *v1alpha1.Inventory {
	list := ToStatus(entries)
	var labels map[string]string
	if shard, ok := s.Labels[v1alpha1.ShardLabel]; ok {
		labels = map[string]string{v1alpha1.SyncShardLabel: shard}
	}
	return &v1alpha1.Inventory{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Inventory"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "Sync", Name: s.Name, UID: s.UID, Controller: ptr.To(true),
		}}},
		EntryCount: len(list),
		Entries:    list,
		Digests:    encodeDigests(entries, digests),
	}
}

// Ref is the status.inventoryRef of s once its Inventory lists entries.
func Ref(s *v1alpha1.Sync, entries []plan.Entry) *v1alpha1.InventoryRef {
	return &v1alpha1.InventoryRef{Name: s.Name, Entries: len(entries)}
}

// FromObject reads an Inventory's entries, as FromStatus does a status.
func FromObject(inv *v1alpha1.Inventory) ([]plan.Entry, error) {
	return fromList(inv.Entries)
}

// Read returns what s applied: the entries of its Inventory joined with
// those of its status.inventory. The status lists entries when an agent
// before the Inventory kind wrote them: on a Sync never synced by a newer
// agent, or after a rollback to such an agent (which knows no Inventory
// and leaves it as it was) and an upgrade again; the union keeps what
// either agent applied prunable (prune still checks each object's label).
// An Inventory of the same name that s does not control (left by an
// earlier Sync of that name, not yet collected) counts as none.
//
// unreadable joins the entries that cannot be parsed (left out, so never
// pruned); err is a failed read, after which nothing is known: a caller
// must not prune on an empty result then.
func Read(ctx context.Context, c client.Reader, s *v1alpha1.Sync) (entries []plan.Entry, unreadable, err error) {
	entries, _, _, unreadable, err = ReadOwned(ctx, c, s)
	return entries, unreadable, err
}

// ReadOwned is Read, and also says whether s's Inventory was found and
// what its digests say (DigestsOf; none for entries read from the status).
func ReadOwned(ctx context.Context, c client.Reader, s *v1alpha1.Sync) (entries []plan.Entry, digests Digests, found bool, unreadable, err error) {
	var inv v1alpha1.Inventory
	switch err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, &inv); {
	case err == nil && metav1.IsControlledBy(&inv, s):
		found = true
		entries, unreadable = FromObject(&inv)
		digests = DigestsOf(&inv)
	case err == nil, apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		// No Inventory (or no Inventory kind, before an agent installed
		// it): the status says it all.
	default:
		return nil, nil, false, nil, fmt.Errorf("read Inventory %s/%s of Sync %s/%s: %w", s.Namespace, s.Name, s.Namespace, s.Name, err)
	}
	if len(s.Status.Inventory) == 0 {
		return entries, digests, found, unreadable, nil
	}
	legacy, bad := FromStatus(&s.Status)
	if unreadable == nil {
		unreadable = bad // as is: callers list its joined errors
	} else if bad != nil {
		unreadable = errors.Join(unreadable, bad)
	}
	return Union(entries, legacy), digests, found, unreadable, nil
}
