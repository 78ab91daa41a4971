package controller

import (
	"context"

	"fmt"
	"github.com/go-logr/logr"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env      *testenv.Env
	scheme   = runtime.NewScheme()
	c        client.Client
	recorder EventRecorder
)

func TestMain(m *testing.M) {
	testenv.MainWith(m, &env, setup)
}

func setup(e *testenv.Env) error {
	ctrl.SetLogger(logr.Discard())
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
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
	if err != nil {
		return err
	}
	defs, err := crd.SyncCRDs()
	if err != nil {
		return err
	}
	for _, def := range defs {
		if err := c.Create(context.Background(), def); err != nil {
			return fmt.Errorf("install the CRD %s: %w", def.Name, err)
		}
		if err := waitEstablished(c, def.Name); err != nil {
			return err
		}
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: e.Clientset.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
		return err
	}
	recorder = b.NewRecorder(scheme, "driftless")
	return nil
}

func waitEstablished(c client.Client, name string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &got); err == nil {
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not Established", name)
}

// harness is one test's namespace, git server, repository and reconciler.
type harness struct {
	t    *testing.T
	ns   string
	srv  *testenv.GitServer
	repo *testenv.Repo
	r    *SyncReconciler
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := testenv.NewGitServer(t)
	h := &harness{
		t:    t,
		ns:   env.Namespace(t),
		srv:  srv,
		repo: srv.NewRepo(t, "fleet"),
	}
	h.r = &SyncReconciler{
		Client:        c,
		Reader:        c,
		Applier:       c,
		RenderOptions: engine.RenderOptions{Scope: MapperScope{Mapper: c.RESTMapper()}},
		Store:         NewStore(),
		Recorder:      recorder,
		CacheDir:      t.TempDir(),
	}
	return h
}

// createSync creates a Sync of the harness's repository over file://,
// letting mutate adjust it first.
func (h *harness) createSync(name string, mutate func(*v1alpha1.Sync)) {
	h.t.Helper()
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: h.repo.FileURL(), Branch: "main"}},
			Interval:        metav1.Duration{Duration: time.Minute},
			TargetNamespace: h.ns,
		},
	}
	if mutate != nil {
		mutate(s)
	}
	if err := c.Create(context.Background(), s); err != nil {
		h.t.Fatalf("create Sync: %v", err)
	}
}

// reconcile runs one sync of the named Sync, as the controller would, and
// returns the Sync as stored afterwards.
func (h *harness) reconcile(name string) *v1alpha1.Sync {
	h.t.Helper()
	key := client.ObjectKey{Namespace: h.ns, Name: name}
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), key, &s); err != nil {
		h.t.Fatal(err)
	}
	return &s
}

func ready(s *v1alpha1.Sync) *metav1.Condition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == v1alpha1.ConditionReady {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

// expectReady fails unless the Sync is Ready=True.
func (h *harness) expectReady(s *v1alpha1.Sync) {
	h.t.Helper()
	cond := ready(s)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		h.t.Fatalf("Sync not Ready: %+v", cond)
	}
}

// expectFailed fails unless the Sync is Ready=False with reason and a
// message containing every one of wants.
func (h *harness) expectFailed(s *v1alpha1.Sync, reason string, wants ...string) {
	h.t.Helper()
	cond := ready(s)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason {
		h.t.Fatalf("Ready = %+v, want False with reason %s", cond, reason)
	}
	for _, w := range wants {
		if !strings.Contains(cond.Message, w) {
			h.t.Errorf("Ready message lacks %q:\n%s", w, cond.Message)
		}
	}
}

// get reads an object; it returns nil when it does not exist.
func get(t *testing.T, apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u)
	if err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		t.Fatalf("get %s %s/%s: %v", kind, namespace, name, err)
	}
	return u
}

// eventsFor returns the notes of the Events regarding the named Sync,
// waiting briefly for the asynchronous recorder.
func eventsFor(t *testing.T, namespace, name string, want string) []string {
	t.Helper()
	var notes []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		notes = notes[:0]
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Regarding.Kind == v1alpha1.SyncKind {
				notes = append(notes, e.Note)
				if strings.Contains(e.Note, want) {
					return notes
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("no event on Sync %s/%s contains %q; events: %q", namespace, name, want, notes)
	return notes
}

func keyOf(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}

// listed returns what the Inventory of s lists, read from the API server
// (none when there is no Inventory), and fails t when the status still
// lists an inventory of its own: the agent moves it.
func listed(t *testing.T, s *v1alpha1.Sync) []v1alpha1.InventoryEntry {
	t.Helper()
	if len(s.Status.Inventory) > 0 {
		t.Errorf("Sync %s/%s lists %d objects in status.inventory, want them in its Inventory", s.Namespace, s.Name, len(s.Status.Inventory))
	}
	var inv v1alpha1.Inventory
	err := c.Get(context.Background(), client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, &inv)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return inv.Entries
}
