package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
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
	scheme := testenv.Scheme()
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

// counted counts the requests that write, and the dry runs, c sends.
type counted struct {
	mu              sync.Mutex
	writes, dryRuns int
}

func (n *counted) add(dryRun []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(dryRun) > 0 {
		n.dryRuns++
	} else {
		n.writes++
	}
}

func (n *counted) now() (writes, dryRuns int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.writes, n.dryRuns
}

// counting is a client like c, counting in n every request that writes
// or dry-runs.
func counting(t *testing.T, n *counted) client.Client {
	t.Helper()
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			n.add((&client.CreateOptions{}).ApplyOptions(opts).DryRun)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			n.add((&client.UpdateOptions{}).ApplyOptions(opts).DryRun)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			n.add((&client.PatchOptions{}).ApplyOptions(opts).DryRun)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			n.add((&client.ApplyOptions{}).ApplyOptions(opts).DryRun)
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			n.add((&client.DeleteOptions{}).ApplyOptions(opts).DryRun)
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// BeforeWrite (the controller waits there for the Sync's finalizer) is
// called once every object has been dry-run, before the write-ahead
// inventory is recorded and before anything is written; its failure
// writes nothing and says what failed, not that the inventory did; a dry
// run never calls it.
func TestRunCallsBeforeWriteOnceValidatedAndBeforeAnyWrite(t *testing.T) {
	tests := []struct {
		name        string
		dryRun      bool
		beforeWrite error
		record      error
		// wantErr is the error's message, as the Sync's status shows it.
		wantErr string
	}{
		{name: "it runs after every dry run and before the inventory and the first write"},
		{name: "a dry run never calls it", dryRun: true},
		{
			name: "its failure writes nothing and is not called an inventory failure", beforeWrite: errors.New("add finalizer: the Sync changed"),
			wantErr: "could not prepare the first write, nothing was applied: add finalizer: the Sync changed",
		},
		{
			name: "a failed record after it says it was the inventory", record: errors.New("the API server is gone"),
			wantErr: "could not prepare the first write, nothing was applied: write-ahead inventory: the API server is gone",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			objects := []render.Object{configMap(t, ns, "a", "1"), configMap(t, ns, "b", "1")}
			var n counted
			var calls []string
			res := engine.Run(context.Background(), counting(t, &n), engine.Input{
				Sync: syncIn(ns), Objects: objects, DryRun: tt.dryRun,
				BeforeWrite: func(context.Context) error {
					calls = append(calls, "BeforeWrite")
					if writes, dryRuns := n.now(); writes != 0 || dryRuns != len(objects) {
						t.Errorf("BeforeWrite was called after %d writes and %d dry runs; want 0 and %d", writes, dryRuns, len(objects))
					}
					return tt.beforeWrite
				},
				Record: func(context.Context, []plan.Entry) error {
					calls = append(calls, "Record")
					if writes, _ := n.now(); writes != 0 {
						t.Errorf("Record was called after %d writes; want 0", writes)
					}
					return tt.record
				},
			})

			wantCalls := []string{"BeforeWrite", "Record"}
			switch {
			case tt.dryRun:
				wantCalls = nil
			case tt.beforeWrite != nil:
				wantCalls = wantCalls[:1]
			}
			if !slices.Equal(calls, wantCalls) {
				t.Errorf("calls = %v, want %v", calls, wantCalls)
			}
			written := exists(t, ns, "a") || exists(t, ns, "b")
			if tt.wantErr == "" {
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				if written == tt.dryRun {
					t.Errorf("written = %v in a run with dry run %v", written, tt.dryRun)
				}
				return
			}
			if res.Reason != v1alpha1.ReasonApplyFailed || res.Err == nil || res.Err.Error() != tt.wantErr {
				t.Errorf("reason %s, err %v; want ApplyFailed, %q", res.Reason, res.Err, tt.wantErr)
			}
			if res.Inventory != nil {
				t.Errorf("inventory = %+v, want nil (the previous one kept)", res.Inventory)
			}
			if written {
				t.Error("an object was written although the sync failed before its first write")
			}
			if writes, _ := n.now(); writes != 0 {
				t.Errorf("%d writes were sent; want none", writes)
			}
		})
	}
}

// inFlight is a client like c that counts the writes and dry runs in
// flight at once (each held for a moment, so that the workers overlap)
// and keeps the most seen.
type inFlight struct {
	client.Client
	mu        sync.Mutex
	now, most int
}

func (f *inFlight) hold() func() {
	f.mu.Lock()
	f.now++
	f.most = max(f.most, f.now)
	f.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	return func() {
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	}
}

func (f *inFlight) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	defer f.hold()()
	return f.Client.Apply(ctx, obj, opts...)
}

func (f *inFlight) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	defer f.hold()()
	return f.Client.Patch(ctx, obj, patch, opts...)
}

// A sync keeps at most Input.Concurrency requests in flight (agent
// --apply-concurrency), and without it apply.DefaultConcurrency: a small
// API server can be spared, and a large sync is not held to a few at a
// time.
func TestRunKeepsTheConcurrencyItIsGivenInFlight(t *testing.T) {
	for _, tc := range []struct {
		concurrency int
		// atLeast and atMost bound the most requests seen in flight.
		atLeast, atMost int
	}{
		{concurrency: 3, atLeast: 3, atMost: 3},
		{concurrency: 0, atLeast: 33, atMost: apply.DefaultConcurrency},
	} {
		t.Run(fmt.Sprintf("concurrency %d", tc.concurrency), func(t *testing.T) {
			ns := env.Namespace(t)
			var objects []render.Object
			for i := range 80 {
				objects = append(objects, configMap(t, ns, fmt.Sprintf("cm-%02d", i), "v1"))
			}
			f := &inFlight{Client: c}
			res := engine.Run(context.Background(), f, engine.Input{Sync: syncIn(ns), Objects: objects, Concurrency: tc.concurrency})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if n := res.Changes.Count(apply.Created); n != len(objects) {
				t.Fatalf("%d objects created, want %d", n, len(objects))
			}
			if f.most < tc.atLeast || f.most > tc.atMost {
				t.Errorf("at most %d requests were in flight at once, want %d to %d", f.most, tc.atLeast, tc.atMost)
			}
		})
	}
}
