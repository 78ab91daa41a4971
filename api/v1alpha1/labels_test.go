package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestTheSyncLabelReadsBackAsTheSyncItWasWrittenFor(t *testing.T) {
	labelled := func(v string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Labels: map[string]string{SyncLabel: v}}
	}
	want := types.NamespacedName{Namespace: "team-a", Name: "web.v2"}
	if got, ok := SyncOf(labelled(SyncLabelValue(want.Namespace, want.Name))); !ok || got != want {
		t.Errorf("SyncOf = %v, %v; want %v", got, ok, want)
	}
	for _, v := range []string{"", "nodot", ".name", "ns."} {
		if got, ok := SyncOf(labelled(v)); ok {
			t.Errorf("SyncOf(%q) = %v, want no Sync", v, got)
		}
	}
}
