package drift

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
)

// Request asks for one managed object to be checked against git.
type Request struct {
	Sync      types.NamespacedName
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	// Cluster names the remote cluster whose watch saw the object (its
	// kubeconfig Secret, see spec.kubeConfig); "" for the agent's own.
	Cluster string
}

// ID is the object's plan ID.
func (r Request) ID() plan.ID {
	return plan.ID{Group: r.GVK.Group, Kind: r.GVK.Kind, Namespace: r.Namespace, Name: r.Name}
}

// RequestFor builds the Request for a managed object's metadata; ok is
// false when its driftless.dev/sync label does not name a Sync.
func RequestFor(gvk schema.GroupVersionKind, obj metav1.Object) (Request, bool) {
	sync, ok := v1alpha1.SyncOf(obj)
	if !ok {
		return Request{}, false
	}
	return Request{Sync: sync, GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}, true
}

// Relevant reports whether an update of a managed object may be drift:
// every write the agent did not make itself, whatever field manager it
// names, except one that changed only what status writers own (the
// managedFields entries of the status subresource). ours says the new
// resourceVersion is one the agent's own write returned (Writes.Ours):
// the agent's own writes are never drift. Resyncs (the same
// resourceVersion) are the caller's to drop.
func Relevant(old, cur []metav1.ManagedFieldsEntry, ours bool) bool {
	if ours {
		return false
	}
	return !statusOnly(old, cur)
}

// statusOnly reports whether cur differs from old only in entries of the
// status subresource: every other entry is the same on both sides, and
// some status entry changed. An update that moved no entry at all is not
// status-only: nothing says what it changed.
func statusOnly(old, cur []metav1.ManagedFieldsEntry) bool {
	return sameEntries(old, cur, false) && !sameEntries(old, cur, true)
}

// sameEntries reports whether old and cur hold the same entries of the
// status subresource (status) or of the object itself (!status).
func sameEntries(old, cur []metav1.ManagedFieldsEntry, status bool) bool {
	prev := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range old {
		if (e.Subresource == "status") == status {
			prev[entryKey(e)] = e
		}
	}
	n := 0
	for _, e := range cur {
		if (e.Subresource == "status") != status {
			continue
		}
		p, ok := prev[entryKey(e)]
		if !ok || !sameTime(p, e) || !sameFields(p, e) {
			return false
		}
		n++
	}
	return n == len(prev)
}

func entryKey(e metav1.ManagedFieldsEntry) string {
	return e.Manager + "\x00" + string(e.Operation) + "\x00" + e.Subresource
}

func sameTime(a, b metav1.ManagedFieldsEntry) bool {
	if a.Time == nil || b.Time == nil {
		return a.Time == b.Time
	}
	return a.Time.Equal(b.Time)
}

func sameFields(a, b metav1.ManagedFieldsEntry) bool {
	if a.FieldsV1 == nil || b.FieldsV1 == nil {
		return a.FieldsV1 == b.FieldsV1
	}
	return bytes.Equal(a.FieldsV1.GetRawBytes(), b.FieldsV1.GetRawBytes())
}

// WrittenSince reports whether any field manager (status writers
// excluded) wrote the object at or after since, the agent included: the
// caller tells the agent's own writes by their resourceVersion (Writes).
func WrittenSince(entries []metav1.ManagedFieldsEntry, since time.Time) bool {
	for _, e := range entries {
		if e.Subresource != "status" && e.Time != nil && !e.Time.Time.Before(since.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

// digestPrefix marks a managedFields field set replaced by its digest.
const digestPrefix = `"sha256:`

// CompactMetadata is a cache transform (client-go's TransformFunc) for
// the metadata-only objects of the drift watches. It keeps what
// RequestFor, Relevant and WrittenSince read — names, labels, and
// each managedFields entry's manager, operation, subresource and time —
// and replaces each entry's field set, the largest part of an object's
// metadata, by a digest of it, which Relevant compares as it compared the
// fields. Attribution reads the fields of the live object from the API
// server, never from the cache. Other objects pass unchanged; an object
// passed twice is not changed again.
func CompactMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	for i, e := range m.ManagedFields {
		if e.FieldsV1 == nil || bytes.HasPrefix(e.FieldsV1.GetRawBytes(), []byte(digestPrefix)) {
			continue
		}
		sum := sha256.Sum256(e.FieldsV1.GetRawBytes())
		m.ManagedFields[i].FieldsV1 = metav1.NewFieldsV1(digestPrefix + hex.EncodeToString(sum[:16]) + `"`)
	}
	return m, nil
}
