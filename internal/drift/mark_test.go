package drift

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMarkChangesWithEveryWriteButAStatusWriters(t *testing.T) {
	at := func(sec int64) *metav1.Time { return &metav1.Time{Time: time.Unix(sec, 0)} }
	base := func() *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{}
		m.UID = types.UID("u1")
		m.ManagedFields = []metav1.ManagedFieldsEntry{
			{Manager: "driftless", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: at(100),
				FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:key":{}}}`)},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: at(90),
				Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
		}
		return m
	}
	want := Mark(base())
	same := map[string]func(*metav1.PartialObjectMetadata){
		"a status writer's update": func(m *metav1.PartialObjectMetadata) {
			m.ManagedFields[1].Time, m.ManagedFields[1].FieldsV1 = at(200), metav1.NewFieldsV1(`{"f:status":{"f:x":{}}}`)
		},
		"the entries in another order": func(m *metav1.PartialObjectMetadata) {
			m.ManagedFields[0], m.ManagedFields[1] = m.ManagedFields[1], m.ManagedFields[0]
		},
		"a new resourceVersion": func(m *metav1.PartialObjectMetadata) { m.ResourceVersion = "99" },
	}
	for name, change := range same {
		m := base()
		change(m)
		if got := Mark(m); got != want {
			t.Errorf("%s changed the mark", name)
		}
	}
	differ := map[string]func(*metav1.PartialObjectMetadata){
		"another manager's update": func(m *metav1.PartialObjectMetadata) {
			m.ManagedFields = append(m.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: at(150), FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:key":{}}}`)})
			m.ManagedFields[0].FieldsV1 = metav1.NewFieldsV1(`{"f:data":{}}`)
		},
		"a field dropped from the agent's set": func(m *metav1.PartialObjectMetadata) {
			m.ManagedFields[0].FieldsV1 = metav1.NewFieldsV1(`{"f:data":{}}`)
		},
		"an apply under the agent's name": func(m *metav1.PartialObjectMetadata) { m.ManagedFields[0].Time = at(101) },
		"a re-created object":             func(m *metav1.PartialObjectMetadata) { m.UID = "u2" },
	}
	for name, change := range differ {
		m := base()
		change(m)
		if got := Mark(m); got == want {
			t.Errorf("%s left the mark as it was", name)
		}
	}
	// The watch cache holds digests of the field sets: marks made from it
	// are compared with marks made from it.
	a, b := base(), base()
	for _, m := range []*metav1.PartialObjectMetadata{a, b} {
		if _, err := CompactMetadata(m); err != nil {
			t.Fatal(err)
		}
	}
	if Mark(a) != Mark(b) {
		t.Error("two compacted copies of one object have different marks")
	}
}

func TestAWritesAnswerIsMarkedAsTheWatchCacheWillMarkIt(t *testing.T) {
	answer := &metav1.PartialObjectMetadata{}
	answer.UID, answer.ResourceVersion = "u1", "7"
	answer.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	answer.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "driftless", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
			Time: &metav1.Time{Time: time.Unix(100, 0)}, FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:key":{}}}`)},
	}
	cached := answer.DeepCopy()
	if _, err := CompactMetadata(cached); err != nil {
		t.Fatal(err)
	}
	if LiveMark(answer) != Mark(cached) {
		t.Error("the answer's mark is not the mark of the watch cache's copy of the same state")
	}
	if LiveMark(cached) != Mark(cached) {
		t.Error("the watch cache's copy, marked again, has another mark")
	}
	if got := string(answer.ManagedFields[0].FieldsV1.GetRawBytes()); got != `{"f:data":{"f:key":{}}}` {
		t.Errorf("LiveMark changed the answer's field set to %s", got)
	}
}
