package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
)

// A restarted agent knows nothing of what the one before it compared,
// and its first sync of each Sync used to compare every object (a read
// and a dry run each). The Inventory keeps, per object, a digest of the
// desired form last verified and a mark of the live object as it was
// then (inventory.Digest, drift.Mark); the first sync after a start
// lists the Sync's kinds with its drift watches (which it starts anyway)
// and takes as unchanged, without a request, every object whose render
// and live mark are those recorded. Everything else is compared.

// metadataReader reads an object's metadata from the drift watches'
// cache (Watches), once its kind is watched.
type metadataReader interface {
	metadata(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (*metav1.PartialObjectMetadata, bool)
}

var _ metadataReader = (*Watches)(nil)

// metadata returns the cached metadata of the object of kind gvk at key:
// false when the kind is not watched or the object is not in the cache.
func (w *Watches) metadata(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (*metav1.PartialObjectMetadata, bool) {
	if !w.Covers([]schema.GroupVersionKind{gvk}) {
		return nil, false // a Get would start an informer and wait for it
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := w.cache.Get(ctx, key, m); err != nil {
		return nil, false
	}
	return m, true
}

// metadataOf returns what reads s's watched objects' metadata, or nil.
func (r *SyncReconciler) metadataOf(s *v1alpha1.Sync) metadataReader {
	m, _ := r.watchesOf(s).(metadataReader)
	return m
}

// verified collects, during one sync, the objects it verified — wrote,
// or found equal to their desired form — and the state it verified: the
// resourceVersion, and for a write the live mark of what the write
// returned. Safe for concurrent use (apply.Options.Written and Found).
type verified struct {
	mu    sync.Mutex
	state map[plan.ID]verifiedState
}

// verifiedState is the state of one object a sync verified: its
// resourceVersion, and its live mark when the sync knows it from its own
// write (marked).
type verifiedState struct {
	rv     string
	mark   [8]byte
	marked bool
}

// wrote records an object the sync wrote, from the write's answer.
func (v *verified) wrote(answer *metav1.PartialObjectMetadata) {
	gvk := answer.GroupVersionKind()
	id := plan.ID{Group: gvk.Group, Kind: gvk.Kind, Namespace: answer.Namespace, Name: answer.Name}
	v.set(id, verifiedState{rv: answer.ResourceVersion, mark: drift.LiveMark(answer), marked: true})
}

// found records an object the sync found equal to its desired form, as
// it was read.
func (v *verified) found(obj *unstructured.Unstructured) {
	v.set(plan.IDOf(obj), verifiedState{rv: obj.GetResourceVersion()})
}

func (v *verified) set(id plan.ID, st verifiedState) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.state == nil {
		v.state = map[plan.ID]verifiedState{}
	}
	v.state[id] = st
}

func (v *verified) get() map[plan.ID]verifiedState {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.state
}

// holdsSecrets reports whether o's desired form holds values from a
// Secret (a Secret, a decrypted file, a secret variable): no digest of it
// is kept in the Inventory, which more people may read than its Secret.
func holdsSecrets(o render.Object) bool {
	return o.Decrypted || len(o.SecretVariables) > 0 || (o.GVK.Group == "" && o.GVK.Kind == "Secret")
}

// digestable returns the desired digest of id's render, false when none
// is kept (no JSON, or values from Secrets).
func digestable(id plan.ID, byID map[plan.ID]render.Object) ([8]byte, bool) {
	o, ok := byID[id]
	if !ok || o.JSON == nil || holdsSecrets(o) {
		return [8]byte{}, false
	}
	return inventory.DesiredDigest(o.JSON), true
}

// startKnown returns, for the first sync of s in this process, a test for
// the objects known unchanged from the Inventory's digests: the render's
// digest is the one recorded, and the drift watches (started here, for
// the kinds of the inventory; one LIST each) hold the object with the
// live mark recorded, not being deleted. Nil, and every object is
// compared, unless the Sync writes and selfHeals, nothing asks for a
// comparison, it was Ready and not drifted at its last applied spec, its
// last full comparison (status.lastComparedAt) is within FullResync, and
// its Inventory has digests. Objects in marked are always compared.
func (r *SyncReconciler) startKnown(ctx context.Context, s *v1alpha1.Sync, byID map[plan.ID]render.Object, marked map[plan.ID]bool, started time.Time) func(plan.Step) bool {
	key := client.ObjectKeyFromObject(s)
	if _, ok := r.Store.LastFull(key); ok || !r.mayTrustDigests(s) {
		return nil
	}
	digests := r.Store.Digests(key, s.UID)
	reader := r.metadataOf(s)
	inv, ok := r.Store.Inventory(key, s.UID)
	if len(digests) == 0 || reader == nil || !ok {
		return nil
	}
	if err := r.watchesOf(s).Ensure(ctx, key, kindsOf(inv), started); err != nil {
		// Those kinds' objects are compared.
		log.FromContext(ctx).Error(err, "cannot watch managed objects; their objects are compared")
	}
	return func(step plan.Step) bool {
		d, ok := digests[step.ID]
		if !ok || marked[step.ID] {
			return false
		}
		if desired, ok := digestable(step.ID, byID); !ok || desired != d.Desired {
			return false
		}
		m, ok := reader.metadata(ctx, step.GroupVersionKind(), client.ObjectKey{Namespace: step.ID.Namespace, Name: step.ID.Name})
		return ok && m.DeletionTimestamp == nil && drift.Mark(m) == d.Live
	}
}

// mayTrustDigests reports whether s's status lets its first sync in this
// process take objects as unchanged from digests: it writes and selfHeals
// (not a dry run), nothing asks for a comparison, it is Ready and not
// drifted at the spec it last applied, and its last full comparison is
// recorded and within FullResync (else one is due anyway).
func (r *SyncReconciler) mayTrustDigests(s *v1alpha1.Sync) bool {
	st := &s.Status
	return s.SelfHealEnabled() && !r.DryRun && !s.DryRun() && !r.mustCompare(s) &&
		meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) &&
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDrifted) &&
		s.Generation == appliedGeneration(st) &&
		st.LastComparedAt != nil && r.now().Sub(st.LastComparedAt.Time) < r.fullResync()
}

// nextDigests returns the digests to record for entries after a sync: for
// an object the sync verified (v), its render's digest and the mark of
// the state it verified — from its own write's answer when it wrote the
// object, else read from the drift watches' cache once that holds the
// verified resourceVersion (else nothing: the cache has not seen that
// state yet, or someone wrote since) —; for an object it did not verify,
// what previous recorded (still true of the state it was made from);
// nothing for the rest. Only objects found equal wait for nothing but the
// cache: the digests of a first sync, which writes every object, need no
// watch.
func nextDigests(ctx context.Context, entries []plan.Entry, previous inventory.Digests, v map[plan.ID]verifiedState,
	byID map[plan.ID]render.Object, reader metadataReader) inventory.Digests {
	out := make(inventory.Digests, len(entries))
	for _, e := range entries {
		st, ok := v[e.ID]
		if !ok {
			if d, ok := previous[e.ID]; ok {
				out[e.ID] = d
			}
			continue
		}
		desired, ok := digestable(e.ID, byID)
		if !ok {
			continue
		}
		if st.marked {
			out[e.ID] = inventory.Digest{Desired: desired, Live: st.mark}
			continue
		}
		if reader == nil {
			continue
		}
		gvk := schema.GroupVersionKind{Group: e.ID.Group, Version: e.Version, Kind: e.ID.Kind}
		m, ok := reader.metadata(ctx, gvk, client.ObjectKey{Namespace: e.ID.Namespace, Name: e.ID.Name})
		if !ok || m.ResourceVersion != st.rv || m.DeletionTimestamp != nil {
			continue
		}
		out[e.ID] = inventory.Digest{Desired: desired, Live: drift.Mark(m)}
	}
	return out
}

// firstSyncDigests is the fewest objects whose digests a Sync's first
// sync records, at the cost of a second write of its Inventory (the first
// is the write-ahead record, made before the objects exist). A smaller
// Sync records them at its next full comparison: a fleet of small Syncs'
// first syncs cost no write more, and a restart before that compares
// their few objects.
const firstSyncDigests = 16

// recordsDigests reports whether a sync that compared every object or not
// (compared), over an inventory that listed stored before it and lists
// entries after, writes the digests of what it verified when they differ
// from those recorded: after a full comparison, except the first sync of
// a Sync of fewer than firstSyncDigests objects.
func recordsDigests(compared bool, stored, entries []plan.Entry) bool {
	return compared && (len(stored) > 0 || len(entries) >= firstSyncDigests)
}

// sameDigests reports whether a and b say the same of entries.
func sameDigests(entries []plan.Entry, a, b inventory.Digests) bool {
	for _, e := range entries {
		if a[e.ID] != b[e.ID] {
			return false
		}
	}
	return true
}
