package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
)

const settingsCM = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: $NS}
data: {color: blue}
`

const deploymentWithoutSelector = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $NS}
spec:
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
`

const numberDataCM = `
apiVersion: v1
kind: ConfigMap
metadata: {name: numbers, namespace: $NS}
data: {port: 8080}
`

func TestApplyWritesNothingWhenOneObjectIsInvalid(t *testing.T) {
	tests := []struct {
		name        string
		path        string
		invalid     string
		wantInError []string
	}{
		{
			name:        "a Deployment without a selector",
			path:        "apps/web.yaml",
			invalid:     deploymentWithoutSelector,
			wantInError: []string{"Deployment/$NS/web (apps/web.yaml#0)", "selector"},
		},
		{
			name:        "a ConfigMap with a number as a data value",
			path:        "config/numbers.yaml",
			invalid:     numberDataCM,
			wantInError: []string{"ConfigMap/$NS/numbers (config/numbers.yaml#0)", "port"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			newNS := ns + "-new"
			cleanupClusterScoped(t, "v1", "Namespace", newNS)
			p := planOf(
				fromGitInto(t, ns, newNS, "namespaces/new.yaml", `{apiVersion: v1, kind: Namespace, metadata: {name: $NS}}`),
				fromGit(t, ns, "config/settings.yaml", settingsCM),
				fromGit(t, ns, tt.path, tt.invalid),
			)

			cs, err := newManager(ns).Apply(context.Background(), p)

			ve := validationError(t, err)
			if len(ve.Written) != 0 {
				t.Errorf("Written = %v, want nothing", actions(ve.Written))
			}
			if len(cs) != 0 {
				t.Errorf("changes = %v, want none", actions(cs))
			}
			want := []string{"1 object(s) failed server-side validation, nothing was applied"}
			for _, w := range tt.wantInError {
				want = append(want, strings.ReplaceAll(w, "$NS", ns))
			}
			expectContains(t, err, want...)
			if strings.Contains(err.Error(), "validation could not complete") {
				t.Errorf("an invalid object is reported as a transient failure: %v", err)
			}
			if get(t, "v1", "ConfigMap", ns, "settings") != nil {
				t.Error("the valid ConfigMap of the same plan was created")
			}
			if get(t, "v1", "Namespace", "", newNS) != nil {
				t.Error("the new Namespace of the same plan was created")
			}
		})
	}
}

func TestApplyValidatesObjectsInNewNamespacesAndKindsOnceThoseExist(t *testing.T) {
	t.Run("a new Namespace and a ConfigMap in it are both created", func(t *testing.T) {
		ns := env.Namespace(t)
		newNS := ns + "-new"
		cleanupClusterScoped(t, "v1", "Namespace", newNS)
		p := planOf(
			fromGitInto(t, ns, newNS, "namespaces/new.yaml", `{apiVersion: v1, kind: Namespace, metadata: {name: $NS}}`),
			fromGitInto(t, ns, newNS, "config/settings.yaml", settingsCM),
		)

		cs := applyOK(t, newManager(ns), p)

		expectActions(t, cs, "Namespace/"+newNS+" Created", "ConfigMap/"+newNS+"/settings Created")
		if got := configMapData(t, newNS, "settings")["color"]; got != "blue" {
			t.Errorf("color = %q, want blue", got)
		}
	})

	t.Run("an invalid object in a new Namespace leaves only the Namespace written", func(t *testing.T) {
		ns := env.Namespace(t)
		newNS := ns + "-new"
		cleanupClusterScoped(t, "v1", "Namespace", newNS)
		p := planOf(
			fromGitInto(t, ns, newNS, "namespaces/new.yaml", `{apiVersion: v1, kind: Namespace, metadata: {name: $NS}}`),
			fromGitInto(t, ns, newNS, "config/settings.yaml", settingsCM),
			fromGitInto(t, ns, newNS, "apps/web.yaml", deploymentWithoutSelector),
			fromGit(t, ns, "config/other.yaml", `{apiVersion: v1, kind: ConfigMap, metadata: {name: other, namespace: $NS}}`),
		)

		cs, err := newManager(ns).Apply(context.Background(), p)

		ve := validationError(t, err)
		if diff := cmp.Diff([]string{"Namespace/" + newNS + " Created"}, actions(ve.Written)); diff != "" {
			t.Errorf("Written (-want +got):\n%s", diff)
		}
		expectActions(t, cs, "Namespace/"+newNS+" Created")
		expectContains(t, err, "only the 1 object(s) written before they could be validated were applied",
			"Deployment/"+newNS+"/web (apps/web.yaml#0)", "selector")
		if got := apply.FailedIDs(err); !cmp.Equal(got, []plan.ID{{Group: "apps", Kind: "Deployment", Namespace: newNS, Name: "web"}}) {
			t.Errorf("FailedIDs = %v, want only the Deployment", got)
		}
		mustGet(t, "v1", "Namespace", "", newNS)
		if get(t, "v1", "ConfigMap", newNS, "settings") != nil {
			t.Error("the valid ConfigMap in the new Namespace was created")
		}
		if get(t, "v1", "ConfigMap", ns, "other") != nil {
			t.Error("the valid ConfigMap in an existing Namespace was created")
		}
	})

	t.Run("a CRD and a custom resource of its kind are both created", func(t *testing.T) {
		ns := env.Namespace(t)
		crdName := "gadgets." + gadgetGroup(ns)
		cleanupClusterScoped(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", crdName)
		p := planOf(
			fromGit(t, ns, "crds/gadgets.yaml", crd(ns)),
			fromGit(t, ns, "gadgets/first.yaml", `
apiVersion: $NS.example.com/v1
kind: Gadget
metadata: {name: first, namespace: $NS}
spec: {size: large}
`),
		)

		cs, err := newManager(ns).Apply(context.Background(), p)

		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		expectActions(t, cs, "CustomResourceDefinition/"+crdName+" Created", "Gadget/"+ns+"/first Created")
		g := mustGet(t, gadgetGroup(ns)+"/v1", "Gadget", ns, "first")
		if size, _, _ := unstructured.NestedString(g.Object, "spec", "size"); size != "large" {
			t.Errorf("spec.size = %q, want large", size)
		}
	})
}

func TestApplyRefusesObjectsOfAnotherSyncAndAdoptsUnlabelledOnes(t *testing.T) {
	t.Run("an object labelled for another Sync stops the whole plan", func(t *testing.T) {
		ns := env.Namespace(t)
		createByHand(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: shared, namespace: $NS, labels: {driftless.dev/sync: other-team.apps}}
data: {owner: other}
`)
		p := planOf(
			fromGit(t, ns, "config/shared.yaml", `
apiVersion: v1
kind: ConfigMap
metadata: {name: shared, namespace: $NS}
data: {owner: fleet}
`),
			fromGit(t, ns, "config/settings.yaml", settingsCM),
		)

		cs, err := newManager(ns).Apply(context.Background(), p)

		ve := validationError(t, err)
		if !ve.Conflict() {
			t.Errorf("Conflict() = false for %v", err)
		}
		if len(cs) != 0 || len(ve.Written) != 0 {
			t.Errorf("changes = %v, written = %v; want none", actions(cs), actions(ve.Written))
		}
		expectContains(t, err, "nothing was applied", "ConfigMap/"+ns+"/shared (config/shared.yaml#0)",
			"Sync other-team/apps", "Sync "+ns+"/fleet")
		live := mustGet(t, "v1", "ConfigMap", ns, "shared")
		if got := live.GetLabels()[v1alpha1.SyncLabel]; got != "other-team.apps" {
			t.Errorf("label %s = %q, want it left as other-team.apps", v1alpha1.SyncLabel, got)
		}
		if got := configMapData(t, ns, "shared")["owner"]; got != "other" {
			t.Errorf("data.owner = %q, want it left as other", got)
		}
		if get(t, "v1", "ConfigMap", ns, "settings") != nil {
			t.Error("the other ConfigMap of the plan was created")
		}
	})

	tests := []struct {
		name        string
		liveLabels  string
		wantAdopted bool
	}{
		{name: "an object with no driftless label is adopted", liveLabels: "{}", wantAdopted: true},
		{name: "an object labelled for this Sync is not adopted again", liveLabels: "{driftless.dev/sync: $NS.fleet}", wantAdopted: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			before := createByHand(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: legacy, namespace: $NS, labels: `+tt.liveLabels+`}
data: {color: red}
`)
			p := planOf(fromGit(t, ns, "config/legacy.yaml", `
apiVersion: v1
kind: ConfigMap
metadata: {name: legacy, namespace: $NS}
data: {color: green}
`))

			cs := applyOK(t, newManager(ns), p)

			expectActions(t, cs, "ConfigMap/"+ns+"/legacy Configured")
			if got := cs[0].Adopted; got != tt.wantAdopted {
				t.Errorf("Adopted = %v, want %v", got, tt.wantAdopted)
			}
			if got := len(cs.Adopted()); got != map[bool]int{true: 1}[tt.wantAdopted] {
				t.Errorf("ChangeSet.Adopted() has %d changes", got)
			}
			if tt.wantAdopted && !strings.Contains(cs[0].Reason, "adopted") {
				t.Errorf("Reason = %q, want it to say the object was adopted", cs[0].Reason)
			}
			live := mustGet(t, "v1", "ConfigMap", ns, "legacy")
			if got := live.GetLabels()[v1alpha1.SyncLabel]; got != ownerOf(ns) {
				t.Errorf("label %s = %q, want %q", v1alpha1.SyncLabel, got, ownerOf(ns))
			}
			if live.GetUID() != before.GetUID() {
				t.Error("the object was re-created instead of updated")
			}
			if got := configMapData(t, ns, "legacy")["color"]; got != "green" {
				t.Errorf("color = %q, want green", got)
			}
		})
	}
}

func TestApplySkipsAnObjectWithReconcileDisabledInTheCluster(t *testing.T) {
	ns := env.Namespace(t)
	createByHand(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata:
  name: frozen
  namespace: $NS
  labels: {driftless.dev/sync: $NS.fleet}
  annotations: {driftless.dev/reconcile: disabled}
data: {color: red}
`)
	p := planOf(fromGit(t, ns, "config/frozen.yaml", `
apiVersion: v1
kind: ConfigMap
metadata: {name: frozen, namespace: $NS}
data: {color: green}
`))

	cs := applyOK(t, newManager(ns), p)

	expectActions(t, cs, "ConfigMap/"+ns+"/frozen Skipped")
	if !strings.Contains(cs[0].Reason, "driftless.dev/reconcile: disabled") {
		t.Errorf("Reason = %q, want it to name the annotation", cs[0].Reason)
	}
	if got := configMapData(t, ns, "frozen")["color"]; got != "red" {
		t.Errorf("color = %q, want it left as red", got)
	}
}

func TestApplyLeavesObjectsEqualToGitUntouched(t *testing.T) {
	ns := env.Namespace(t)
	p := planOf(fromGit(t, ns, "config/settings.yaml", settingsCM))
	m := newManager(ns)
	expectActions(t, applyOK(t, m, p), "ConfigMap/"+ns+"/settings Created")
	before := mustGet(t, "v1", "ConfigMap", ns, "settings").GetResourceVersion()

	expectActions(t, applyOK(t, m, p), "ConfigMap/"+ns+"/settings Unchanged")

	if after := mustGet(t, "v1", "ConfigMap", ns, "settings").GetResourceVersion(); after != before {
		t.Errorf("resourceVersion changed from %s to %s: the object was rewritten", before, after)
	}
}

// faultyClient fails the server-side dry-run of one object with err, as an
// overloaded or unreachable API server would, and passes everything else
// to the real client.
type faultyClient struct {
	client.Client
	name string
	err  error
}

func (f *faultyClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	o := (&client.ApplyOptions{}).ApplyOptions(opts)
	if named, ok := obj.(interface{ GetName() string }); ok && named.GetName() == f.name && len(o.DryRun) > 0 {
		return f.err
	}
	return f.Client.Apply(ctx, obj, opts...)
}

// Patch is Apply for a server-side apply whose answer is its metadata.
func (f *faultyClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if apply, dryRun := serverSideApply(patch, opts); apply && dryRun && obj.GetName() == f.name {
		return f.err
	}
	return f.Client.Patch(ctx, obj, patch, opts...)
}

func TestApplyReportsAnUnansweredDryRunAsTransientNotInvalid(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{name: "the API server is unavailable", err: apierrors.NewServiceUnavailable("etcd is not answering")},
		{name: "the API server throttles", err: apierrors.NewTooManyRequests("slow down", 1)},
		{name: "the API server times out", err: apierrors.NewTimeoutError("request did not complete within 34s", 1)},
		{name: "the request's deadline passes", err: fmt.Errorf("Patch %q: %w", "https://127.0.0.1/api/v1", context.DeadlineExceeded)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			m := newManagerWith(&faultyClient{Client: c, name: "unlucky", err: tt.err}, ns)
			p := planOf(
				fromGit(t, ns, "config/settings.yaml", settingsCM),
				fromGit(t, ns, "config/unlucky.yaml", `{apiVersion: v1, kind: ConfigMap, metadata: {name: unlucky, namespace: $NS}}`),
			)

			cs, err := m.Apply(context.Background(), p)

			expectContains(t, err, "validation could not complete, nothing was applied",
				"ConfigMap/"+ns+"/unlucky (config/unlucky.yaml#0)")
			var ve *apply.ValidationError
			if errors.As(err, &ve) {
				t.Errorf("a transient failure is a *ValidationError: %v", err)
			}
			if !errors.Is(err, tt.err) && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the cause is not kept for errors.Is: %v", err)
			}
			if len(cs) != 0 {
				t.Errorf("changes = %v, want none", actions(cs))
			}
			if get(t, "v1", "ConfigMap", ns, "settings") != nil {
				t.Error("the ConfigMap that passed validation was created")
			}
		})
	}
}

func TestDryRunReportsEveryActionAndWritesNothing(t *testing.T) {
	ns := env.Namespace(t)
	cm := func(name, color string) render.Object {
		return fromGit(t, ns, "config/"+name+".yaml", `
apiVersion: v1
kind: ConfigMap
metadata: {name: `+name+`, namespace: $NS}
data: {color: `+color+`}
`)
	}
	previous := planOf(cm("same", "blue"), cm("changed", "blue"), cm("removed", "blue"))
	applyOK(t, newManager(ns), previous)
	versions := map[string]string{}
	for _, name := range []string{"same", "changed", "removed"} {
		versions[name] = mustGet(t, "v1", "ConfigMap", ns, name).GetResourceVersion()
	}
	p := plan.New([]render.Object{cm("same", "blue"), cm("changed", "green"), cm("added", "blue")}, previous.Inventory())
	m := newManager(ns, func(o *apply.Options) { o.DryRun = true })

	cs, err := m.Apply(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	pruned, err := m.Prune(context.Background(), p.Prune)
	if err != nil {
		t.Fatal(err)
	}

	all := append(cs, pruned...)
	expectActions(t, all,
		"ConfigMap/"+ns+"/added Created",
		"ConfigMap/"+ns+"/changed Configured",
		"ConfigMap/"+ns+"/same Unchanged",
		"ConfigMap/"+ns+"/removed Pruned")
	color := func(u *unstructured.Unstructured) string {
		if u == nil {
			return "<nil>"
		}
		s, _, _ := unstructured.NestedString(u.Object, "data", "color")
		return s
	}
	type liveApplied struct{ Live, Applied string }
	got := map[string]liveApplied{}
	for _, ch := range all {
		got[ch.ID.Name] = liveApplied{color(ch.Live), color(ch.Applied)}
	}
	want := map[string]liveApplied{
		"added":   {"<nil>", "blue"},
		"changed": {"blue", "green"},
		"same":    {"blue", "blue"},
		"removed": {"blue", "<nil>"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("data.color of Live and Applied (-want +got):\n%s", diff)
	}
	if all[0].Origin != "config/added.yaml#0" {
		t.Errorf("Origin = %q, want config/added.yaml#0", all[0].Origin)
	}

	if get(t, "v1", "ConfigMap", ns, "added") != nil {
		t.Error("a dry run created an object")
	}
	for name, rv := range versions {
		if got := mustGet(t, "v1", "ConfigMap", ns, name).GetResourceVersion(); got != rv {
			t.Errorf("a dry run wrote ConfigMap %s", name)
		}
	}
}

func TestAManagerAppliedAgainSeesWhatItCreatedInANewNamespace(t *testing.T) {
	ns := env.Namespace(t)
	newNS := ns + "-new"
	cleanupClusterScoped(t, "v1", "Namespace", newNS)
	p := planOf(
		fromGitInto(t, ns, newNS, "namespaces/new.yaml", `{apiVersion: v1, kind: Namespace, metadata: {name: $NS}}`),
		fromGitInto(t, ns, newNS, "config/settings.yaml", settingsCM),
	)
	m := newManager(ns)
	applyOK(t, m, p)

	cs := applyOK(t, m, p)

	expectActions(t, cs, "Namespace/"+newNS+" Unchanged", "ConfigMap/"+newNS+"/settings Unchanged")
}

// countingClient counts the reads and the applies (dry runs apart) that
// pass through it to the real client.
type countingClient struct {
	client.Client
	gets, dryRuns, applies int
}

func (cc *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	cc.gets++
	return cc.Client.Get(ctx, key, obj, opts...)
}

func (cc *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if o := (&client.ApplyOptions{}).ApplyOptions(opts); len(o.DryRun) > 0 {
		cc.dryRuns++
	} else {
		cc.applies++
	}
	return cc.Client.Apply(ctx, obj, opts...)
}

// Patch counts a server-side apply whose answer is its metadata as Apply.
func (cc *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	switch apply, dryRun := serverSideApply(patch, opts); {
	case apply && dryRun:
		cc.dryRuns++
	case apply:
		cc.applies++
	}
	return cc.Client.Patch(ctx, obj, patch, opts...)
}

func TestApplyCreatesANewObjectWithoutReadingItFirst(t *testing.T) {
	ns := env.Namespace(t) // exists: its objects are validated at once
	cc := &countingClient{Client: c}
	m := newManagerWith(cc, ns)

	expectActions(t, applyOK(t, m, planOf(fromGit(t, ns, "config/settings.yaml", settingsCM))), "ConfigMap/"+ns+"/settings Created")
	if cc.gets != 0 || cc.dryRuns != 1 || cc.applies != 1 {
		t.Errorf("creating one object made %d reads, %d dry runs and %d applies; want 0, 1 and 1", cc.gets, cc.dryRuns, cc.applies)
	}

	// An object that exists is read once, for its owner and what changed.
	*cc = countingClient{Client: c}
	changed := strings.Replace(settingsCM, "color: blue", "color: green", 1)
	if changed == settingsCM {
		t.Fatal("the fixture no longer sets color: blue")
	}
	expectActions(t, applyOK(t, m, planOf(fromGit(t, ns, "config/settings.yaml", changed))), "ConfigMap/"+ns+"/settings Configured")
	if cc.gets != 1 || cc.dryRuns != 1 || cc.applies != 1 {
		t.Errorf("changing one object made %d reads, %d dry runs and %d applies; want 1, 1 and 1", cc.gets, cc.dryRuns, cc.applies)
	}
}
