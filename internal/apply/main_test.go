package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env *testenv.Env
	// c reads and writes objects of any kind the cluster serves, learning
	// new kinds (CRDs created by a test) as it meets them.
	c client.Client
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

// serverSideApply reports whether patch is a server-side apply (as the
// Manager sends one whose answer it needs only the metadata of), and
// whether it is a dry run.
func serverSideApply(patch client.Patch, opts []client.PatchOption) (apply, dryRun bool) {
	return patch.Type() == types.ApplyPatchType, len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) > 0
}

// ownerOf is the driftless.dev/sync label value of the test's Sync, named
// "fleet", in namespace ns.
func ownerOf(ns string) string { return ns + ".fleet" }

// newManager returns a Manager writing for the Sync "fleet" of namespace
// ns, with its default options changed by mutate.
func newManager(ns string, mutate ...func(*apply.Options)) *apply.Manager {
	return newManagerWith(c, ns, mutate...)
}

func newManagerWith(cl client.Client, ns string, mutate ...func(*apply.Options)) *apply.Manager {
	opts := apply.DefaultOptions(ownerOf(ns))
	opts.WaitTimeout = 30 * time.Second
	for _, f := range mutate {
		f(&opts)
	}
	return apply.NewManager(cl, opts)
}

// object parses one YAML manifest, with every "$NS" replaced by ns.
func object(t *testing.T, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(manifest, "$NS", ns)), &m); err != nil {
		t.Fatalf("parse manifest: %v\n%s", err, manifest)
	}
	return &unstructured.Unstructured{Object: m}
}

// fromGit is a manifest as render hands it over: from file path, labelled
// for the Sync "fleet" of namespace ns.
func fromGit(t *testing.T, ns, path, manifest string) render.Object {
	t.Helper()
	return fromGitInto(t, ns, ns, path, manifest)
}

// fromGitInto is fromGit for an object of the Sync "fleet" of namespace
// ns that lives in (or, for a Namespace, is) objNS: "$NS" in manifest
// stands for objNS.
func fromGitInto(t *testing.T, ns, objNS, path, manifest string) render.Object {
	t.Helper()
	u := object(t, objNS, manifest)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	if _, ok := labels[v1alpha1.SyncLabel]; !ok {
		labels[v1alpha1.SyncLabel] = ownerOf(ns)
	}
	u.SetLabels(labels)
	o, err := render.NewObject(u, render.Origin{Path: path, Line: 1})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// planOf plans objects for a Sync with no previous inventory.
func planOf(objs ...render.Object) plan.Plan { return plan.New(objs, nil) }

// applyOK applies p and fails the test on any error.
func applyOK(t *testing.T, m *apply.Manager, p plan.Plan) apply.ChangeSet {
	t.Helper()
	cs, err := m.Apply(context.Background(), p)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return cs
}

// get reads an object; it returns nil when it does not exist.
func get(t *testing.T, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		t.Fatalf("get %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// mustGet is get for an object that must exist.
func mustGet(t *testing.T, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := get(t, apiVersion, kind, ns, name)
	if u == nil {
		t.Fatalf("%s %s/%s does not exist", kind, ns, name)
	}
	return u
}

// configMapData returns the data of a ConfigMap that must exist.
func configMapData(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	data, _, err := unstructured.NestedStringMap(mustGet(t, "v1", "ConfigMap", ns, name).Object, "data")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// createByHand creates a manifest as a person with kubectl would, and
// returns it as stored.
func createByHand(t *testing.T, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := object(t, ns, manifest)
	if err := c.Create(context.Background(), u, client.FieldOwner("kubectl-create")); err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return u
}

// editByHand changes an object as `kubectl edit` would.
func editByHand(t *testing.T, u *unstructured.Unstructured, edit func(*unstructured.Unstructured)) {
	t.Helper()
	err := retryOnConflict(func() error {
		live := get(t, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
		if live == nil {
			return fmt.Errorf("%s %s is gone", u.GetKind(), u.GetName())
		}
		edit(live)
		return c.Update(context.Background(), live, client.FieldOwner("kubectl-edit"))
	})
	if err != nil {
		t.Fatalf("edit %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func retryOnConflict(f func() error) error {
	for i := 0; ; i++ {
		err := f()
		if !apierrors.IsConflict(err) || i == 10 {
			return err
		}
	}
}

// cleanupClusterScoped deletes a cluster-scoped object (a Namespace, a
// CRD) that a test's plan creates, when the test ends.
func cleanupClusterScoped(t *testing.T, apiVersion, kind, name string) {
	t.Cleanup(func() {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
		u.SetName(name)
		_ = c.Delete(context.Background(), u)
	})
}

// actions renders a ChangeSet as "Kind/namespace/name Action" lines, for
// go-cmp diffs.
func actions(cs apply.ChangeSet) []string {
	out := make([]string, len(cs))
	for i, ch := range cs {
		out[i] = ch.ID.String() + " " + string(ch.Action)
	}
	return out
}

func expectActions(t *testing.T, cs apply.ChangeSet, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, actions(cs), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// expectContains fails unless err's message contains every one of wants.
func expectContains(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

// validationError fails unless err is a *apply.ValidationError.
func validationError(t *testing.T, err error) *apply.ValidationError {
	t.Helper()
	var ve *apply.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error is %T, want *apply.ValidationError: %v", err, err)
	}
	return ve
}

// crd is a namespaced CustomResourceDefinition of kind Gadget, in a
// group of the test's own, whose spec takes any fields and which has a
// status subresource.
func crd(ns string) string {
	return strings.ReplaceAll(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.GROUP
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, "GROUP", gadgetGroup(ns))
}

func gadgetGroup(ns string) string { return ns + ".example.com" }

// installGadgets creates the Gadget CRD of the test's namespace, as an
// administrator would, and waits until clients can use the kind.
func installGadgets(t *testing.T, ns string) {
	t.Helper()
	def := object(t, ns, crd(ns))
	if err := c.Create(context.Background(), def); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	cleanupClusterScoped(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", def.GetName())
	gk := schema.GroupKind{Group: gadgetGroup(ns), Kind: "Gadget"}
	testenv.Eventually(t, 30*time.Second, "kind "+gk.String()+" served", func() string {
		if _, err := c.RESTMapper().RESTMapping(gk, "v1"); err != nil {
			return err.Error()
		}
		return ""
	})
}
