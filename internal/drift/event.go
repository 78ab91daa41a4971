package drift

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
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
}

// ID is the object's plan ID.
func (r Request) ID() plan.ID {
	return plan.ID{Group: r.GVK.Group, Kind: r.GVK.Kind, Namespace: r.Namespace, Name: r.Name}
}

// RequestFor builds the Request for a managed object's metadata; ok is
// false when its driftless.dev/sync label does not name a Sync.
func RequestFor(gvk schema.GroupVersionKind, obj metav1.Object) (Request, bool) {
	owner := obj.GetLabels()[v1alpha1.SyncLabel]
	// Namespaces cannot contain dots, so the first one separates the
	// Sync's namespace from its name.
	ns, name, ok := strings.Cut(owner, ".")
	if !ok || ns == "" || name == "" {
		return Request{}, false
	}
	return Request{Sync: types.NamespacedName{Namespace: ns, Name: name}, GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}, true
}

// Relevant reports whether an update of a managed object may be drift:
// a field manager other than self wrote it (status writers excluded), or
// fields owned by self were taken away without self writing. Updates by
// self alone, and resyncs, are not.
func Relevant(old, cur []metav1.ManagedFieldsEntry, self string) bool {
	prev := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range old {
		prev[entryKey(e)] = e
	}
	selfSeen := false
	for _, e := range cur {
		if e.Subresource == "status" {
			continue
		}
		p, existed := prev[entryKey(e)]
		if e.Manager == self {
			selfSeen = true
			if existed && sameTime(p, e) && !sameFields(p, e) {
				return true // someone else took fields from driftless
			}
			continue
		}
		if !existed || !sameTime(p, e) || !sameFields(p, e) {
			return true
		}
	}
	if !selfSeen {
		for _, e := range old {
			if e.Manager == self && e.Subresource != "status" {
				return true // driftless no longer owns anything: someone took it all
			}
		}
	}
	return false
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

// WrittenByOthersSince reports whether a field manager other than self
// (status writers excluded) wrote the object at or after since.
func WrittenByOthersSince(entries []metav1.ManagedFieldsEntry, self string, since time.Time) bool {
	for _, e := range entries {
		if e.Manager != self && e.Subresource != "status" && e.Time != nil && !e.Time.Time.Before(since.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

// digestPrefix marks a managedFields field set replaced by its digest.
const digestPrefix = `"sha256:`

// CompactMetadata is a cache transform (client-go's TransformFunc) for
// the metadata-only objects of the drift watches. It keeps what
// RequestFor, Relevant and WrittenByOthersSince read — names, labels, and
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
