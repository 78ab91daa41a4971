package engine_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env *testenv.Env
	c   client.Client
)

func TestMain(m *testing.M) { testenv.MainWith(m, &env, setup) }

func setup(e *testenv.Env) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(e.Config, httpClient)
	if err != nil {
		return err
	}
	c, err = client.New(e.Config, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	return err
}

// syncIn is a Sync named fleet in ns.
func syncIn(ns string) *v1alpha1.Sync {
	return &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns}}
}

// configMap is a rendered ConfigMap of the Sync fleet in ns.
func configMap(t *testing.T, ns, name, value string) render.Object {
	t.Helper()
	return rendered(t, configMapObject(t, ns, name, value), name+".yaml")
}

// configMapObject is configMap decoded, to change before it is rendered.
func configMapObject(t *testing.T, ns, name, value string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s, labels: {driftless.dev/sync: %s.fleet}}\ndata: {key: %q}\n", name, ns, ns, value)
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// rendered is u as the render gives it, from file.
func rendered(t *testing.T, u *unstructured.Unstructured, file string) render.Object {
	t.Helper()
	o, err := render.NewObject(u, render.Origin{Path: file})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func exists(t *testing.T, ns, name string) bool {
	t.Helper()
	var cm corev1.ConfigMap
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// unanswered fails every dry-run apply as an API server that cannot answer.
type unanswered struct{ client.Client }

func (u unanswered) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if o := (&client.ApplyOptions{}).ApplyOptions(opts); len(o.DryRun) > 0 {
		return apierrors.NewServiceUnavailable("etcd is not answering")
	}
	return u.Client.Apply(ctx, obj, opts...)
}

// Patch fails a server-side apply dry run whose answer is its metadata.
func (u unanswered) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if o := (&client.PatchOptions{}).ApplyOptions(opts); patch.Type() == types.ApplyPatchType && len(o.DryRun) > 0 {
		return apierrors.NewServiceUnavailable("etcd is not answering")
	}
	return u.Client.Patch(ctx, obj, patch, opts...)
}

func TestRunRecordsAnInventoryOnlyForWhatMayHaveBeenWritten(t *testing.T) {
	previous := func(ns string) []plan.Entry {
		return []plan.Entry{{ID: plan.ID{Kind: "ConfigMap", Namespace: ns, Name: "old"}, Version: "v1"}}
	}
	tests := []struct {
		name       string
		client     func() client.Client
		dryRun     bool
		objects    func(t *testing.T, ns string) []render.Object
		wantReason string
		// wantInventory: nil keeps the previous inventory.
		wantInventory func(ns string) []string
	}{
		{
			name:   "a sync that applies everything records exactly the render",
			client: func() client.Client { return c },
			objects: func(t *testing.T, ns string) []render.Object {
				return []render.Object{configMap(t, ns, "a", "1")}
			},
			wantInventory: func(ns string) []string { return []string{"/ConfigMap/" + ns + "/a"} },
		},
		{
			name:   "a dry run keeps the inventory",
			client: func() client.Client { return c },
			dryRun: true,
			objects: func(t *testing.T, ns string) []render.Object {
				return []render.Object{configMap(t, ns, "a", "1")}
			},
		},
		{
			name:   "a validation the server could not answer keeps the inventory",
			client: func() client.Client { return unanswered{c} },
			objects: func(t *testing.T, ns string) []render.Object {
				return []render.Object{configMap(t, ns, "a", "1")}
			},
			wantReason: v1alpha1.ReasonApplyFailed,
		},
		{
			name:   "a dry run the server could not answer keeps the inventory",
			client: func() client.Client { return unanswered{c} },
			dryRun: true,
			objects: func(t *testing.T, ns string) []render.Object {
				return []render.Object{configMap(t, ns, "a", "1")}
			},
			wantReason: v1alpha1.ReasonApplyFailed,
		},
		{
			name:   "a bad wave is refused before any request",
			client: func() client.Client { return nil },
			objects: func(t *testing.T, ns string) []render.Object {
				u := configMapObject(t, ns, "a", "1")
				u.SetAnnotations(map[string]string{v1alpha1.WaveAnnotation: "first"})
				return []render.Object{rendered(t, u, "a.yaml")}
			},
			wantReason: v1alpha1.ReasonBuildFailed,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			res := engine.Run(context.Background(), tc.client(), engine.Input{
				Sync: syncIn(ns), Objects: tc.objects(t, ns), Inventory: previous(ns), DryRun: tc.dryRun,
			})
			if res.Reason != tc.wantReason {
				t.Fatalf("reason = %q (%v), want %q", res.Reason, res.Err, tc.wantReason)
			}
			if tc.wantInventory == nil {
				if res.Inventory != nil {
					t.Errorf("inventory = %v, want the previous one kept (nil)", res.Inventory)
				}
			} else {
				var got []string
				for _, e := range res.Inventory {
					got = append(got, e.ID.Group+"/"+e.ID.Kind+"/"+e.ID.Namespace+"/"+e.ID.Name)
				}
				if want := tc.wantInventory(ns); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("inventory = %v, want %v", got, want)
				}
			}
			if (tc.dryRun || tc.wantReason != "") && exists(t, ns, "a") {
				t.Error("the ConfigMap was written")
			}
		})
	}
}

func TestRunRefusesAnObjectOfAnotherSyncAsAConflict(t *testing.T) {
	ns := env.Namespace(t)
	theirs := configMapObject(t, ns, "shared", "theirs")
	theirs.SetLabels(map[string]string{v1alpha1.SyncLabel: ns + ".other"})
	if err := c.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	res := engine.Run(context.Background(), c, engine.Input{
		Sync:    syncIn(ns),
		Objects: []render.Object{configMap(t, ns, "shared", "ours"), configMap(t, ns, "mine", "ours")},
	})
	if res.Reason != v1alpha1.ReasonConflict {
		t.Fatalf("reason = %q (%v), want Conflict", res.Reason, res.Err)
	}
	if exists(t, ns, "mine") {
		t.Error("an object of the refused sync was written")
	}
	if res.Inventory != nil {
		t.Errorf("inventory = %v, want the previous one kept", res.Inventory)
	}
}

// The write-ahead inventory: a sync that adds objects records the union
// of the stored inventory and its plan before its first write, and only
// then; a sync that adds nothing, or writes nothing, records nothing; a
// failed record stops the sync before it writes.
func TestRunRecordsTheInventoryBeforeItsFirstWrite(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	s := syncIn(ns)
	var recorded [][]plan.Entry
	record := func(_ context.Context, entries []plan.Entry) error {
		// Before the first write: nothing of this sync exists yet.
		if exists(t, ns, "b") {
			t.Error("Record was called after b was written")
		}
		recorded = append(recorded, entries)
		return nil
	}
	first := engine.Run(ctx, c, engine.Input{Sync: s, Objects: []render.Object{configMap(t, ns, "a", "1")}, Record: record})
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	recorded = nil
	second := engine.Run(ctx, c, engine.Input{Sync: s, Objects: []render.Object{configMap(t, ns, "b", "1")}, Inventory: first.Inventory, Record: record})
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	if len(recorded) != 1 || len(recorded[0]) != 2 {
		t.Fatalf("recorded %+v, want one record of a and b", recorded)
	}

	recorded = nil
	steady := engine.Run(ctx, c, engine.Input{Sync: s, Objects: []render.Object{configMap(t, ns, "b", "2")}, Inventory: second.Inventory, Record: record})
	if steady.Err != nil || len(recorded) != 0 {
		t.Errorf("a sync that adds nothing recorded %+v (err %v); want no record", recorded, steady.Err)
	}
	dry := engine.Run(ctx, c, engine.Input{Sync: s, Objects: []render.Object{configMap(t, ns, "c", "1")}, Inventory: second.Inventory, Record: record, DryRun: true})
	if dry.Err != nil || len(recorded) != 0 {
		t.Errorf("a dry run recorded %+v (err %v); want no record", recorded, dry.Err)
	}

	failed := engine.Run(ctx, c, engine.Input{Sync: s, Objects: []render.Object{configMap(t, ns, "b", "2"), configMap(t, ns, "d", "1")},
		Inventory: second.Inventory, Record: func(context.Context, []plan.Entry) error { return fmt.Errorf("the API server is gone") }})
	if failed.Err == nil || failed.Reason != v1alpha1.ReasonApplyFailed || failed.Inventory != nil {
		t.Errorf("a failed record: reason %s, err %v, inventory %+v; want ApplyFailed and the inventory kept", failed.Reason, failed.Err, failed.Inventory)
	}
	if exists(t, ns, "d") {
		t.Error("d was written although its inventory could not be recorded")
	}
}
