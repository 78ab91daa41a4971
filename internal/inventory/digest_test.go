package inventory

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
)

func TestDigestsRoundTripThroughTheInventory(t *testing.T) {
	a := plan.Entry{ID: plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "a"}, Version: "v1"}
	b := plan.Entry{ID: plan.ID{Group: "apps", Kind: "Deployment", Namespace: "n", Name: "b"}, Version: "v1"}
	c := plan.Entry{ID: plan.ID{Kind: "Namespace", Name: "n"}, Version: "v1"}
	digests := Digests{
		a.ID: {Desired: DesiredDigest([]byte(`{"a":1}`)), Live: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}},
		c.ID: {Desired: DesiredDigest([]byte(`{"c":1}`)), Live: [8]byte{8, 7, 6, 5, 4, 3, 2, 1}},
		// Not an entry: not written.
		{Kind: "ConfigMap", Namespace: "n", Name: "gone"}: {Desired: [8]byte{9}},
	}
	inv := Object(&v1alpha1.Sync{}, []plan.Entry{a, b, c}, digests)
	got := DigestsOf(inv)
	want := Digests{a.ID: digests[a.ID], c.ID: digests[c.ID]}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("DigestsOf(Object(entries, digests)) (-want +got):\n%s", d)
	}
	// 16 bytes per entry: 10,000 entries stay far below etcd's 1.5 MiB.
	if size := len(inv.Digests); size > 3+(16*3+2)/3*4 {
		t.Errorf("digests of 3 entries take %d bytes", size)
	}
}

func TestDigestsThatDoNotMatchTheEntriesTellNothing(t *testing.T) {
	a := plan.Entry{ID: plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "a"}, Version: "v1"}
	b := plan.Entry{ID: plan.ID{Kind: "ConfigMap", Namespace: "n", Name: "b"}, Version: "v1"}
	inv := Object(&v1alpha1.Sync{}, []plan.Entry{a}, Digests{a.ID: {Desired: [8]byte{1}, Live: [8]byte{2}}})
	for name, change := range map[string]func(*v1alpha1.Inventory){
		// An agent that knew no digests added an entry: server-side apply
		// keeps no field it did not send, but a hand edit might.
		"an entry more":   func(inv *v1alpha1.Inventory) { inv.Entries = append(inv.Entries, ToStatus([]plan.Entry{b})...) },
		"another version": func(inv *v1alpha1.Inventory) { inv.Digests = "v2:" + inv.Digests[3:] },
		"not base64":      func(inv *v1alpha1.Inventory) { inv.Digests = "v1:***" },
		"absent":          func(inv *v1alpha1.Inventory) { inv.Digests = "" },
	} {
		t.Run(name, func(t *testing.T) {
			inv := inv.DeepCopy()
			change(inv)
			if got := DigestsOf(inv); len(got) != 0 {
				t.Errorf("DigestsOf = %v, want none", got)
			}
		})
	}
	if got := Object(&v1alpha1.Sync{}, []plan.Entry{a, b}, Digests{}).Digests; got != "" {
		t.Errorf("an Inventory with no digest known has digests %q, want none", got)
	}
}

func TestTheDesiredDigestLeavesOutTheRevisionOfTheOrigin(t *testing.T) {
	at := func(rev, value string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"` + v1alpha1.OriginAnnotation + `":"app/cm.yaml@` + rev + `"},"name":"a"},"data":{"k":"` + value + `"}}`)
	}
	if DesiredDigest(at("0123456", "v1")) != DesiredDigest(at("89abcde", "v1")) {
		t.Error("a new commit that left the object as it was changed its digest")
	}
	if DesiredDigest(at("0123456", "v1")) == DesiredDigest(at("0123456", "v2")) {
		t.Error("a changed value left the digest as it was")
	}
}
