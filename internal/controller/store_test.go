package controller

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
)

// fleetKey is the Sync the Store tests keep state for.
var fleetKey = keyOf("ns", "fleet")

func storeObject(name, value string) render.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, value, "data", "key")
	return mustObject(u, render.Origin{Path: name + ".yaml"})
}

func mustObject(u *unstructured.Unstructured, o render.Origin) render.Object {
	obj, err := render.NewObject(u, o)
	if err != nil {
		panic(err)
	}
	return obj
}

// decoded returns the object o holds, decoded.
func decoded(t *testing.T, o render.Object) *unstructured.Unstructured {
	t.Helper()
	u, err := o.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// byIDOf maps objects by ID, as a sync has its render.
func byIDOf(objects ...render.Object) map[plan.ID]render.Object { return indexed(objects) }

func TestAStoreGivesDriftChecksOnlyWhatASyncWrote(t *testing.T) {
	s := NewStore()
	a1, b1 := storeObject("a", "1"), storeObject("b", "1")
	a2 := storeObject("a", "2")
	idA, idB := plan.ObjectID(a1), plan.ObjectID(b1)
	desired := func(uid types.UID, id plan.ID) (string, bool) {
		t.Helper()
		c, ok := s.BeginCheck(fleetKey)
		if !ok {
			t.Fatal("a drift check was kept out with no sync running")
		}
		defer c.Release()
		o, ok := c.Desired(uid, id)
		if !ok {
			return "", false
		}
		v, _, _ := unstructured.NestedString(decoded(t, o).Object, "data", "key")
		return v, true
	}

	w := s.BeginWrite(fleetKey, "uid-1")
	if _, ok := s.BeginCheck(fleetKey); ok {
		t.Fatal("a drift check ran while a sync held the gate")
	}
	w.Replace(byIDOf(a1, b1))
	w.Release()
	if v, _ := desired("uid-1", idA); v != "1" {
		t.Errorf("after a full sync, a reverts to %q, want 1", v)
	}

	// A sync that wrote a at its new render and pruned b, then failed.
	w = s.BeginWrite(fleetKey, "uid-1")
	w.Record(apply.ChangeSet{{ID: idA, Action: apply.Configured}, {ID: idB, Action: apply.Pruned}},
		map[plan.ID]render.Object{idA: a2})
	w.Release()
	if v, _ := desired("uid-1", idA); v != "2" {
		t.Errorf("a written by the failed sync reverts to %q, want its new render 2", v)
	}
	if _, ok := desired("uid-1", idB); ok {
		t.Error("b, pruned by the sync, would be re-created by a drift check")
	}

	// An object whose write may or may not have happened is left alone.
	w = s.BeginWrite(fleetKey, "uid-1")
	w.Forget(idA)
	w.Release()
	if _, ok := desired("uid-1", idA); ok {
		t.Error("an object of uncertain state would be reverted")
	}

	// A Sync deleted and created again with the same name starts empty.
	w = s.BeginWrite(fleetKey, "uid-1")
	w.Replace(byIDOf(a1))
	w.Release()
	if _, ok := desired("uid-2", idA); ok {
		t.Error("a new Sync of the same name reverts to the old Sync's render")
	}
	w = s.BeginWrite(fleetKey, "uid-2")
	_, kept := w.Applied(idA)
	w.Release()
	if kept {
		t.Error("a sync of the new Sync sees the old Sync's render")
	}
}

func TestAFailedSyncLeavesItsUncertainObjectsToTheNextSync(t *testing.T) {
	a := plan.ID{Kind: "ConfigMap", Namespace: "ns", Name: "a"}
	gone := plan.ID{Kind: "ConfigMap", Namespace: "ns", Name: "gone"}
	failedWrite := errors.Join(&apply.ObjectError{ID: a, Err: errors.New("apply failed: admission webhook refused")})
	tests := []struct {
		name string
		res  engine.Result
		want []plan.ID
	}{
		{"a failed write (maybe a half-done re-creation)", engine.Result{Reason: v1alpha1.ReasonApplyFailed, Err: failedWrite}, []plan.ID{a}},
		{"a failed prune: nothing meant to be pruned is reverted",
			engine.Result{Reason: v1alpha1.ReasonPruneFailed, Err: errors.Join(&apply.ObjectError{ID: gone, Err: errors.New("forbidden")}),
				Plan: plan.Plan{Prune: []plan.Entry{{ID: gone}}}}, []plan.ID{gone, gone}},
		{"a refused validation wrote nothing", engine.Result{Reason: v1alpha1.ReasonValidationFailed,
			Err: &apply.ValidationError{Errs: []*apply.ObjectError{{ID: a, Err: errors.New("invalid")}}}}, nil},
		{"an unanswered validation wrote nothing", engine.Result{Reason: v1alpha1.ReasonApplyFailed,
			Err: errors.Join(apply.ErrValidationIncomplete, &apply.ObjectError{ID: a, Err: errors.New("503")})}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := uncertain(tc.res)
			if len(got) != len(tc.want) {
				t.Fatalf("uncertain = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("uncertain = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestAppliedGenerationOfASyncRecordedBeforeTheFieldExisted(t *testing.T) {
	ready := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded}}
	failed := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonFetchFailed}}
	for _, tc := range []struct {
		name string
		st   v1alpha1.SyncStatus
		want int64
	}{
		{"the field set", v1alpha1.SyncStatus{LastAppliedGeneration: 3, ObservedGeneration: 4, Conditions: failed}, 3},
		{"an old Ready Sync: its observed generation was applied", v1alpha1.SyncStatus{ObservedGeneration: 4, Conditions: ready}, 4},
		{"an old failed Sync: unknown", v1alpha1.SyncStatus{ObservedGeneration: 4, Conditions: failed}, 0},
	} {
		if got := appliedGeneration(&tc.st); got != tc.want {
			t.Errorf("%s: appliedGeneration = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestTheStoreGivesBackObjectsAsRendered(t *testing.T) {
	s := NewStore()
	deploy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "web:1.2", "resources": map[string]any{"limits": map[string]any{"cpu": 0.5}}}},
		}}},
	}}
	web := mustObject(deploy, render.Origin{Path: "apps/web.yaml"})
	web.SecretVariables = []string{"token"}
	objects := []render.Object{web, storeObject("cm", "1")}
	s.SetRendered(fleetKey, RenderKey{UID: "uid-1", Revision: "rev", Generation: 1}, objects)

	got, ok := s.Rendered(fleetKey, RenderKey{UID: "uid-1", Revision: "rev", Generation: 1})
	if !ok || len(got) != 2 {
		t.Fatalf("the cached render is %d objects (found %v), want 2", len(got), ok)
	}
	if !equality.Semantic.DeepEqual(decoded(t, got[0]).Object, deploy.Object) {
		t.Errorf("the cached Deployment came back changed (-want +got):\n%s", cmp.Diff(deploy.Object, decoded(t, got[0]).Object))
	}
	if got[0].Origin.Path != "apps/web.yaml" || len(got[0].SecretVariables) != 1 {
		t.Errorf("the cached Deployment lost its origin or Secret variables: %+v", got[0])
	}
	// Every sync of this render reads the JSON the render made: the
	// cache copies nothing per sync.
	again, _ := s.Rendered(fleetKey, RenderKey{UID: "uid-1", Revision: "rev", Generation: 1})
	for i, o := range again {
		if &o.JSON[0] != &objects[i].JSON[0] {
			t.Errorf("%s: Rendered returned a copy of its JSON, not the render's", plan.ObjectID(o))
		}
	}

	w := s.BeginWrite(fleetKey, "uid-1")
	w.Replace(byIDOf(got[0]))
	w.Release()
	c, _ := s.BeginCheck(fleetKey)
	desired, ok := c.Desired("uid-1", plan.IDOf(deploy))
	c.Release()
	if !ok || !equality.Semantic.DeepEqual(decoded(t, desired).Object, deploy.Object) {
		t.Errorf("a drift check reverts to something else than the applied Deployment (found %v) (-want +got):\n%s", ok, cmp.Diff(deploy.Object, decoded(t, desired).Object))
	}
}

func TestARenderAndWhatWasAppliedFromItAreHeldOnce(t *testing.T) {
	s := NewStore()
	objects := []render.Object{storeObject("a", "1"), storeObject("b", "1")}
	s.SetRendered(fleetKey, RenderKey{UID: "uid-1", Revision: "rev", Generation: 1}, objects)
	rendered, _ := s.Rendered(fleetKey, RenderKey{UID: "uid-1", Revision: "rev", Generation: 1})
	w := s.BeginWrite(fleetKey, "uid-1")
	w.Replace(byIDOf(rendered[0]))
	idB := plan.ObjectID(rendered[1])
	w.Record(apply.ChangeSet{{ID: idB, Action: apply.Configured}}, byIDOf(rendered[1]))
	w.Release()

	st := s.state(fleetKey)
	for _, o := range st.rendered.objects {
		held := st.applied[plan.ObjectID(o)].JSON
		if len(held) == 0 || &held[0] != &o.JSON[0] {
			t.Errorf("%s is held twice: once rendered, once applied", plan.ObjectID(o))
		}
	}
}

func TestTheStoreFindsARenderBySyncRevisionGenerationVariablesOrUnchangedInputs(t *testing.T) {
	s := NewStore()
	made := RenderKey{UID: "uid-1", Revision: "rev-1", Generation: 1, Variables: "vars", Inputs: "paths"}
	s.SetRendered(fleetKey, made, []render.Object{storeObject("a", "1")})

	other := func(change func(*RenderKey)) RenderKey {
		k := made
		change(&k)
		return k
	}
	for name, want := range map[string]struct {
		key            RenderKey
		render, inputs bool
	}{
		"the same render":                 {made, true, true},
		"another revision, same paths":    {other(func(k *RenderKey) { k.Revision = "rev-2" }), false, true},
		"another revision, other paths":   {other(func(k *RenderKey) { k.Revision, k.Inputs = "rev-2", "other" }), false, false},
		"another revision, paths unknown": {other(func(k *RenderKey) { k.Revision, k.Inputs = "rev-2", "" }), false, false},
		"a new generation":                {other(func(k *RenderKey) { k.Generation = 2 }), false, false},
		"other variables":                 {other(func(k *RenderKey) { k.Variables = "changed" }), false, false},
		"a Sync re-created":               {other(func(k *RenderKey) { k.UID = "uid-2" }), false, false},
	} {
		if _, got := s.Rendered(fleetKey, want.key); got != want.render || s.HasRendered(fleetKey, want.key) != want.render {
			t.Errorf("%s: Rendered finds the render %v, want %v", name, got, want.render)
		}
		if _, got := s.RenderedInputs(fleetKey, want.key); got != want.inputs {
			t.Errorf("%s: RenderedInputs finds the render %v, want %v", name, got, want.inputs)
		}
	}
	if inputs, ok := s.Inputs(fleetKey, "uid-1", 1); !ok || inputs != "paths" {
		t.Errorf("Inputs = %q, %v; want the paths' digest", inputs, ok)
	}
	if _, ok := s.Rendered(keyOf("ns", "other"), made); ok {
		t.Error("a render of one Sync is found for another")
	}

	// A render that read something besides git (Revision "") is never
	// found again.
	s.SetRendered(fleetKey, other(func(k *RenderKey) { k.Revision, k.Inputs = "", "" }), []render.Object{storeObject("a", "1")})
	if _, ok := s.Rendered(fleetKey, made); ok {
		t.Error("a render that read outside git is reused")
	}
}
