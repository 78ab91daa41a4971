package drift

import (
	"cmp"
	"crypto/sha256"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mark identifies the state of an object's fields as its managedFields
// record it: a digest of its UID and of every managedFields entry but
// those of the status subresource (manager, operation, API version, time
// and field set, in the form given: the drift watches' cache holds the
// digests CompactMetadata leaves). A write by anyone that changes a field
// the agent applied changes the field sets or times of these entries (an
// update moves the field to its writer, a forced apply takes it, a
// removal drops it from its owner's set), and a deleted and re-created
// object has another UID; status writers' updates do not count. Two
// objects with the same Mark and the same desired form are equal as far as
// an apply of that form is concerned, with one exception: a writer that
// changes, within the second of the entry's time, only fields it already
// owned and the agent also applied (a shared field whose value it changes
// is taken from the agent, which changes the set).
//
// Marks are compared only with marks made the same way, from the same
// kind of source (the watch cache); the result is not a wire format of
// the API server's.
func Mark(obj metav1.Object) [8]byte {
	entries := slices.Clone(obj.GetManagedFields())
	entries = slices.DeleteFunc(entries, func(e metav1.ManagedFieldsEntry) bool { return e.Subresource == "status" })
	slices.SortFunc(entries, func(a, b metav1.ManagedFieldsEntry) int {
		return cmp.Or(cmp.Compare(a.Manager, b.Manager), cmp.Compare(a.Operation, b.Operation),
			cmp.Compare(a.Subresource, b.Subresource), cmp.Compare(a.APIVersion, b.APIVersion))
	})
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	field("driftless live v1")
	field(string(obj.GetUID()))
	for _, e := range entries {
		field(e.Manager)
		field(string(e.Operation))
		field(e.APIVersion)
		field(e.Subresource)
		t := ""
		if e.Time != nil {
			t = strconv.FormatInt(e.Time.Unix(), 10)
		}
		field(t)
		var fields []byte
		if e.FieldsV1 != nil {
			fields = e.FieldsV1.GetRawBytes()
		}
		field(string(fields))
	}
	var out [8]byte
	copy(out[:], h.Sum(nil))
	return out
}

// LiveMark is the Mark the drift watches' cache will give obj, from an
// object whose managedFields hold their field sets whole, such as the API
// server's answer to a write: the mark of the field sets' digests
// CompactMetadata leaves. obj is not changed. A sync marks what it wrote
// from the write's answer, without waiting for the watch to see it.
func LiveMark(obj metav1.Object) [8]byte {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: obj.GetUID(), ManagedFields: slices.Clone(obj.GetManagedFields())}}
	compact, _ := CompactMetadata(m)
	return Mark(compact.(*metav1.PartialObjectMetadata))
}
