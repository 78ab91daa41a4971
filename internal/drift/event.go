package drift

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unique"

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
// the metadata-only objects of the drift watches, which hold every
// managed object's metadata while the agent runs. It keeps what the agent
// reads of them — RequestFor, Relevant, WrittenSince, Mark, Writes.Ours
// and the restart's check: name, namespace, UID, resourceVersion, the
// deletion time, the driftless.dev/ labels, and each managedFields
// entry's manager, operation, API version, subresource and time — and
// replaces each entry's field set, the largest part of an object's
// metadata, by a digest of it, which Relevant and Mark compare as they
// compared the fields. It drops the rest: annotations (the origin, or
// kubectl's last-applied configuration, is often most of an object's
// metadata: the admission webhook and attribution read the object from
// the API server, never from this cache), other labels, owner
// references, finalizers, generation and creation time. The strings
// every object repeats (API versions, managers, operations) are shared.
// Other objects pass unchanged; an object passed twice is not changed
// again.
func CompactMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	m.TypeMeta = metav1.TypeMeta{APIVersion: intern(m.APIVersion), Kind: intern(m.Kind)}
	m.ObjectMeta = metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp, Labels: ownLabels(m.Labels), ManagedFields: m.ManagedFields,
	}
	for i := range m.ManagedFields {
		e := &m.ManagedFields[i]
		e.Manager, e.APIVersion, e.Subresource = intern(e.Manager), intern(e.APIVersion), intern(e.Subresource)
		e.Operation, e.FieldsType = metav1.ManagedFieldsOperationType(intern(string(e.Operation))), intern(e.FieldsType)
		if e.FieldsV1 == nil || bytes.HasPrefix(e.FieldsV1.GetRawBytes(), []byte(digestPrefix)) {
			continue
		}
		sum := sha256.Sum256(e.FieldsV1.GetRawBytes())
		e.FieldsV1 = metav1.NewFieldsV1(digestPrefix + hex.EncodeToString(sum[:16]) + `"`)
	}
	return m, nil
}

// ownLabels is the driftless.dev/ labels of labels (the Sync's, the
// shard's), nil for none; the map is labels itself when it holds no
// other.
func ownLabels(labels map[string]string) map[string]string {
	n := 0
	for k := range labels {
		if strings.HasPrefix(k, ownPrefix) {
			n++
		}
	}
	if n == len(labels) {
		return labels
	}
	if n == 0 {
		return nil
	}
	own := make(map[string]string, n)
	for k, v := range labels {
		if strings.HasPrefix(k, ownPrefix) {
			own[intern(k)] = v
		}
	}
	return own
}

// intern returns the one copy of s the process keeps (unique.Make): the
// watches hold thousands of objects that each repeat the same few
// strings. A string no object holds any more is collected.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// ownPrefix starts the names of the labels driftless writes.
const ownPrefix = "driftless.dev/"
