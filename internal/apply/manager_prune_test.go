package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
)

func configMapEntry(ns, name string) plan.Entry {
	return plan.Entry{ID: plan.ID{Kind: "ConfigMap", Namespace: ns, Name: name}, Version: "v1"}
}

func TestPruneDeletesOnlyWhatThisSyncStillOwns(t *testing.T) {
	tests := []struct {
		name string
		// live is the object in the cluster, or "" for none.
		live       string
		wantAction string // "" for no change at all
		wantReason []string
		wantGone   bool
	}{
		{
			name:       "an object labelled for this Sync is deleted",
			live:       `{apiVersion: v1, kind: ConfigMap, metadata: {name: old, namespace: $NS, labels: {driftless.dev/sync: $NS.fleet}}}`,
			wantAction: "Pruned",
			wantGone:   true,
		},
		{
			name:       "an object labelled for another Sync is skipped",
			live:       `{apiVersion: v1, kind: ConfigMap, metadata: {name: old, namespace: $NS, labels: {driftless.dev/sync: other-team.apps}}}`,
			wantAction: "Skipped",
			wantReason: []string{"not pruned", `"other-team.apps"`, "another owner"},
		},
		{
			name:       "an object whose label was removed is skipped",
			live:       `{apiVersion: v1, kind: ConfigMap, metadata: {name: old, namespace: $NS}}`,
			wantAction: "Skipped",
			wantReason: []string{"not pruned", "driftless.dev/sync"},
		},
		{
			name: "an object with prune disabled is skipped",
			live: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: old
  namespace: $NS
  labels: {driftless.dev/sync: $NS.fleet}
  annotations: {driftless.dev/prune: disabled}
`,
			wantAction: "Skipped",
			wantReason: []string{"not pruned", "driftless.dev/prune: disabled"},
		},
		{
			name:     "an object already gone is left out silently",
			wantGone: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			if tt.live != "" {
				createByHand(t, ns, tt.live)
			}

			cs, err := newManager(ns).Prune(context.Background(), []plan.Entry{configMapEntry(ns, "old")})

			if err != nil {
				t.Fatalf("prune: %v", err)
			}
			var want []string
			if tt.wantAction != "" {
				want = []string{"ConfigMap/" + ns + "/old " + tt.wantAction}
			}
			expectActions(t, cs, want...)
			for _, w := range tt.wantReason {
				if !strings.Contains(cs[0].Reason, w) {
					t.Errorf("Reason = %q, want it to contain %q", cs[0].Reason, w)
				}
			}
			if gone := get(t, "v1", "ConfigMap", ns, "old") == nil; gone != tt.wantGone {
				t.Errorf("gone = %v, want %v", gone, tt.wantGone)
			}
		})
	}
}

func TestPruneOfAKindNoLongerServedIsFine(t *testing.T) {
	ns := env.Namespace(t)
	installGadgets(t, ns)
	createByHand(t, ns, `{apiVersion: $NS.example.com/v1, kind: Gadget, metadata: {name: old, namespace: $NS, labels: {driftless.dev/sync: $NS.fleet}}}`)
	deleteGadgetCRD(t, ns)
	entry := plan.Entry{ID: plan.ID{Group: gadgetGroup(ns), Kind: "Gadget", Namespace: ns, Name: "old"}, Version: "v1"}

	cs, err := newManager(ns).Prune(context.Background(), []plan.Entry{entry, configMapEntry(ns, "also-gone")})

	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	expectActions(t, cs)
}

// refusingDeletes fails the deletion of the object named name, as an API
// server with a broken admission webhook would.
type refusingDeletes struct {
	client.Client
	name string
}

func (r *refusingDeletes) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if obj.GetName() == r.name {
		return apierrors.NewInternalError(errors.New(`failed calling webhook "guard.example.com": connection refused`))
	}
	return r.Client.Delete(ctx, obj, opts...)
}

func TestPruneGoesOnPastAnObjectItCannotDelete(t *testing.T) {
	ns := env.Namespace(t)
	for _, name := range []string{"a-first", "b-stuck", "c-third"} {
		createByHand(t, ns, `{apiVersion: v1, kind: ConfigMap, metadata: {name: `+name+`, namespace: $NS, labels: {driftless.dev/sync: $NS.fleet}}}`)
	}
	m := newManagerWith(&refusingDeletes{Client: c, name: "b-stuck"}, ns)

	cs, err := m.Prune(context.Background(), []plan.Entry{configMapEntry(ns, "a-first"), configMapEntry(ns, "b-stuck"), configMapEntry(ns, "c-third")})

	expectContains(t, err, "ConfigMap/"+ns+"/b-stuck", "prune failed", "guard.example.com")
	if diff := cmp.Diff([]plan.ID{{Kind: "ConfigMap", Namespace: ns, Name: "b-stuck"}}, apply.FailedIDs(err)); diff != "" {
		t.Errorf("FailedIDs (-want +got):\n%s", diff)
	}
	expectActions(t, cs, "ConfigMap/"+ns+"/a-first Pruned", "ConfigMap/"+ns+"/c-third Pruned")
	for name, wantGone := range map[string]bool{"a-first": true, "b-stuck": false, "c-third": true} {
		if gone := get(t, "v1", "ConfigMap", ns, name) == nil; gone != wantGone {
			t.Errorf("ConfigMap %s gone = %v, want %v", name, gone, wantGone)
		}
	}
}

// deleteGadgetCRD deletes the test's Gadget CRD and waits until the API
// server no longer serves the kind.
func deleteGadgetCRD(t *testing.T, ns string) {
	t.Helper()
	def := object(t, ns, crd(ns))
	if err := c.Delete(context.Background(), def); err != nil {
		t.Fatalf("delete CRD: %v", err)
	}
	gv := schema.GroupVersion{Group: gadgetGroup(ns), Version: "v1"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := env.Clientset.Discovery().ServerResourcesForGroupVersion(gv.String())
		if err != nil && get(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", def.GetName()) == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still served", gv)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
