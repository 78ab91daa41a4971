package drift

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/api/v1alpha1"
)

func entry(manager string, at time.Time, fields string, sub string) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	op := metav1.ManagedFieldsOperationUpdate
	if manager == "driftless" {
		op = metav1.ManagedFieldsOperationApply
	}
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: &t, FieldsV1: metav1.NewFieldsV1(fields), Subresource: sub}
}

func TestRelevantTellsDriftFromOurOwnAndStatusWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	ours := entry("driftless", t0, `{"f:spec":{"f:replicas":{}}}`, "")
	tests := []struct {
		name     string
		old, cur []metav1.ManagedFieldsEntry
		// own: the new resourceVersion is one the agent's write returned.
		own  bool
		want bool
	}{
		{"our own apply is not drift",
			[]metav1.ManagedFieldsEntry{ours},
			[]metav1.ManagedFieldsEntry{entry("driftless", t1, `{"f:spec":{"f:replicas":{},"f:x":{}}}`, "")}, true, false},
		{"an apply by someone else under our field manager's name is drift",
			[]metav1.ManagedFieldsEntry{ours},
			[]metav1.ManagedFieldsEntry{entry("driftless", t1, `{"f:spec":{"f:replicas":{},"f:x":{}}}`, "")}, false, true},
		{"an apply under our name in the same second, with the same fields, is drift",
			[]metav1.ManagedFieldsEntry{ours},
			[]metav1.ManagedFieldsEntry{ours}, false, true},
		{"a status update by a controller is not drift",
			[]metav1.ManagedFieldsEntry{ours},
			[]metav1.ManagedFieldsEntry{ours, entry("kube-controller-manager", t1, `{"f:status":{}}`, "status")}, false, false},
		{"a second status update by a controller is not drift",
			[]metav1.ManagedFieldsEntry{ours, entry("kube-controller-manager", t0, `{"f:status":{}}`, "status")},
			[]metav1.ManagedFieldsEntry{ours, entry("kube-controller-manager", t1, `{"f:status":{}}`, "status")}, false, false},
		{"kubectl edit is drift",
			[]metav1.ManagedFieldsEntry{ours},
			[]metav1.ManagedFieldsEntry{ours, entry("kubectl-edit", t1, `{"f:spec":{"f:replicas":{}}}`, "")}, false, true},
		{"a second edit by the same manager is drift",
			[]metav1.ManagedFieldsEntry{ours, entry("kubectl-edit", t0, `{"f:spec":{"f:replicas":{}}}`, "")},
			[]metav1.ManagedFieldsEntry{ours, entry("kubectl-edit", t1, `{"f:spec":{"f:replicas":{}}}`, "")}, false, true},
		{"fields taken from us without our write is drift",
			[]metav1.ManagedFieldsEntry{ours},
			[]metav1.ManagedFieldsEntry{entry("driftless", t0, `{"f:spec":{}}`, "")}, false, true},
		{"an annotation removed with its manager's entry is drift (reconcile: disabled taken off)",
			[]metav1.ManagedFieldsEntry{ours, entry("kubectl-annotate", t0, `{"f:metadata":{"f:annotations":{}}}`, "")},
			[]metav1.ManagedFieldsEntry{ours}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Relevant(tt.old, tt.cur, tt.own); got != tt.want {
				t.Errorf("Relevant = %v, want %v", got, tt.want)
			}
			// The drift watches' cache holds digests of the field sets:
			// the answer is the same.
			if got := Relevant(compacted(t, tt.old), compacted(t, tt.cur), tt.own); got != tt.want {
				t.Errorf("Relevant of the cached (compacted) metadata = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWritesKnowsOnlyTheResourceVersionItsOwnWriteReturned(t *testing.T) {
	w := NewWrites()
	w.Wrote("uid-1", "41")
	switch {
	case !w.Ours("uid-1", "41"):
		t.Error("the resourceVersion our write returned is not ours")
	case w.Ours("uid-1", "42"):
		t.Error("a later resourceVersion (someone else's write) is taken for ours")
	case w.Ours("uid-2", "41"):
		t.Error("another object's resourceVersion is taken for ours")
	}
	w.Forget("uid-1")
	if w.Ours("uid-1", "41") || w.Len() != 0 {
		t.Errorf("a forgotten object is still remembered (%d entries)", w.Len())
	}
}

// compacted is entries as the drift watches' cache holds them
// (CompactMetadata), passed twice, as a transform may be.
func compacted(t *testing.T, entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	t.Helper()
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ManagedFields: slices.Clone(entries)}}
	for range 2 {
		out, err := CompactMetadata(m)
		if err != nil {
			t.Fatal(err)
		}
		m = out.(*metav1.PartialObjectMetadata)
	}
	for i, e := range m.ManagedFields {
		if e.FieldsV1 != nil && len(e.FieldsV1.GetRawBytes()) > len(digestPrefix)+33 {
			t.Fatalf("entry %d keeps %d bytes of fields, want a digest", i, len(e.FieldsV1.GetRawBytes()))
		}
	}
	return m.ManagedFields
}

// TestTheWatchCacheKeepsOnlyWhatTheAgentReads: the drift watches hold
// every managed object's metadata for as long as the agent runs; the
// cache keeps what the agent reads of it (the Sync label, names, UID,
// resourceVersion, deletion, the managedFields entries with digests of
// their field sets) and drops the rest, the annotations first (an
// object's origin, or kubectl's last-applied configuration, is often
// most of its metadata). The object's Mark is the same before and after,
// so the digests in Inventories written before still match.
func TestTheWatchCacheKeepsOnlyWhatTheAgentReads(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	gone := metav1.NewTime(at.Add(time.Minute))
	grace := int64(30)
	full := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "web", GenerateName: "we", Namespace: "shop", UID: "uid-1", ResourceVersion: "42", Generation: 3,
				CreationTimestamp: at, DeletionTimestamp: &gone, DeletionGracePeriodSeconds: &grace,
				Labels: map[string]string{v1alpha1.SyncLabel: "ops.shop", v1alpha1.SyncShardLabel: "a", "app": "web", "team": "checkout"},
				Annotations: map[string]string{v1alpha1.OriginAnnotation: "apps/web.yaml#0@1a2b3c4",
					"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"apps/v1","kind":"Deployment"}`,
					"deployment.kubernetes.io/revision":                "1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "uid-0"}},
				Finalizers:      []string{"example.com/keep"},
				ManagedFields: []metav1.ManagedFieldsEntry{
					{Manager: "driftless", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", Time: &at,
						FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
					{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &at,
						FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`), Subresource: "status"},
				},
			},
		}
	}
	out, err := CompactMetadata(full())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	want := full()
	want.ObjectMeta = metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1", ResourceVersion: "42", DeletionTimestamp: &gone,
		Labels:        map[string]string{v1alpha1.SyncLabel: "ops.shop", v1alpha1.SyncShardLabel: "a"},
		ManagedFields: compacted(t, full().ManagedFields)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the cached metadata (-want +got):\n%s", diff)
	}
	if Mark(got) != Mark(want) {
		t.Error("the object's Mark changed with what the cache leaves out")
	}
	if req, ok := RequestFor(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, got); !ok || req.Sync.Name != "shop" {
		t.Errorf("RequestFor the cached metadata = %+v, %v; want a request for Sync ops/shop", req, ok)
	}
	again, err := CompactMetadata(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("the cached metadata passed twice (-want +got):\n%s", diff)
	}
}
