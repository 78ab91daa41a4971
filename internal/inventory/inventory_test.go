package inventory

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
)

func TestEncodeDecodeRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   plan.ID
	}{
		{"a core namespaced object", plan.ID{Kind: "ConfigMap", Namespace: "shop", Name: "app"}},
		{"a cluster-scoped object of a group", plan.ID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"}},
		{"an RBAC name with underscores", plan.ID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "team_a_reader"}},
		{"an RBAC name with colons", plan.ID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: "system:controller:team_a"}},
		{"a namespaced RoleBinding with both", plan.ID{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding", Namespace: "team-a", Name: "x:y_z"}},
		{"a custom resource", plan.ID{Group: "example.com", Kind: "Widget", Namespace: "a", Name: "w.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := Encode(tc.id)
			got, err := Decode(key)
			if err != nil {
				t.Fatalf("Decode(%q): %v", key, err)
			}
			if got != tc.id {
				t.Errorf("Decode(Encode(id)) = %+v, want %+v (key %q)", got, tc.id, key)
			}
		})
	}
}

func TestDecodeReadsTheLegacyForm(t *testing.T) {
	for key, want := range map[string]plan.ID{
		"shop_app__ConfigMap": {Kind: "ConfigMap", Namespace: "shop", Name: "app"},
		"_team_a_reader_rbac.authorization.k8s.io_ClusterRole": {Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "team_a_reader"},
		"_system:controller:x_rbac.authorization.k8s.io_ClusterRoleBinding": {
			Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding", Name: "system:controller:x"},
		"a_w.1_example.com_Widget": {Group: "example.com", Kind: "Widget", Namespace: "a", Name: "w.1"},
	} {
		got, err := Decode(key)
		if err != nil || got != want {
			t.Errorf("Decode(%q) = %+v, %v; want %+v", key, got, err, want)
		}
	}
}

func TestDecodeRefusesGarbage(t *testing.T) {
	for _, key := range []string{"garbage", "a_b", "a_b_c", "/ConfigMap/ns", "g/K/ns/name/extra", "g//ns/name", "_a__"} {
		if id, err := Decode(key); err == nil {
			t.Errorf("Decode(%q) = %+v, want an error", key, id)
		}
	}
}

func TestFromStatusKeepsReadableEntriesAndReportsTheRest(t *testing.T) {
	st := &v1alpha1.SyncStatus{Inventory: []v1alpha1.InventoryEntry{
		{ID: "/ConfigMap/shop/app", Version: "v1", Wave: 1},
		{ID: "nonsense", Version: "v1"},
		{ID: "_a_b_rbac.authorization.k8s.io_ClusterRole", Version: "v1"},
	}}
	got, err := FromStatus(st)
	if err == nil {
		t.Error("FromStatus did not report the unreadable entry")
	}
	want := []plan.Entry{
		{ID: plan.ID{Kind: "ConfigMap", Namespace: "shop", Name: "app"}, Version: "v1", Wave: 1},
		{ID: plan.ID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "a_b"}, Version: "v1"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("FromStatus (-want +got):\n%s", d)
	}
	// Writing them back uses the new encoding, and reads back the same.
	again, err := FromStatus(&v1alpha1.SyncStatus{Inventory: ToStatus(got)})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, again); d != "" {
		t.Errorf("round trip through ToStatus (-want +got):\n%s", d)
	}
}

func TestUnionKeepsOrderAndTakesTheNewerEntry(t *testing.T) {
	a := plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "a"}
	b := plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "b"}
	c := plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "c"}
	got := Union(
		[]plan.Entry{{ID: a, Version: "v1"}, {ID: b, Version: "v1", Wave: 0}},
		[]plan.Entry{{ID: b, Version: "v2", Wave: 2}, {ID: c, Version: "v1"}},
	)
	want := []plan.Entry{{ID: a, Version: "v1"}, {ID: b, Version: "v2", Wave: 2}, {ID: c, Version: "v1"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Union (-want +got):\n%s", d)
	}
}

func TestFailedPrunesKeepsOnlyTheFailedEntries(t *testing.T) {
	a := plan.Entry{ID: plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "a"}, Version: "v1"}
	b := plan.Entry{ID: plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "b"}, Version: "v1"}
	err := errors.Join(&apply.ObjectError{ID: b.ID, Err: errors.New("forbidden")})
	got := FailedPrunes([]plan.Entry{a, b}, err)
	if d := cmp.Diff([]plan.Entry{b}, got); d != "" {
		t.Errorf("FailedPrunes (-want +got):\n%s", d)
	}
	if got := FailedPrunes([]plan.Entry{a, b}, nil); len(got) != 0 {
		t.Errorf("FailedPrunes(nil error) = %v, want none", got)
	}
}
