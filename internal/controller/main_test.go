package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env    *testenv.Env
	scheme = testenv.Scheme()
	// c is the admin's client: the tests arrange and read the cluster
	// with it.
	c client.Client
	// agentConfig and agentClient are the agent's own identity, as
	// production runs it: the ServiceAccount driftless of agentNamespace
	// with config/rbac's ClusterRole driftless-manager, by a token the
	// API server issued. The harness's reconciler runs as it.
	agentConfig *rest.Config
	agentClient client.Client
	recorder    EventRecorder
)

// tenantAccount is the ServiceAccount the harness's Syncs act as
// (--default-service-account), made in each test's namespace and bound
// there to tenantRole.
const (
	tenantAccount = "tenant"
	tenantRole    = "driftless-test-tenant"
)

// testTenancy is the agent's default tenancy (docs/security.md), with
// file:// sources allowed because the tests' repositories are served so,
// and tenantAccount as the default ServiceAccount.
func testTenancy() Tenancy {
	t := DefaultTenancy(agentNamespace)
	t.FileURLs, t.DefaultServiceAccount = true, tenantAccount
	return t
}

func TestMain(m *testing.M) {
	testenv.MainWith(m, &env, setup)
}

func setup(e *testenv.Env) error {
	ctrl.SetLogger(logr.Discard())
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
	if err := e.InstallCRDs(context.Background(), defs...); err != nil {
		return err
	}
	if agentConfig, err = agentIdentity(e); err != nil {
		return err
	}
	if agentClient, err = client.New(agentConfig, client.Options{Scheme: scheme, Mapper: mapper}); err != nil {
		return err
	}
	agentEvents, err := kubernetes.NewForConfig(agentConfig)
	if err != nil {
		return err
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: agentEvents.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
		return err
	}
	recorder = b.NewRecorder(scheme, "driftless")
	return nil
}

// agentIdentity makes the agent's ServiceAccount in agentNamespace with
// the ClusterRole of config/rbac/manager_role.yaml, the role tenants'
// accounts are bound to, and returns a config that authenticates as the
// agent with a token the API server issued for it.
func agentIdentity(e *testenv.Env) (*rest.Config, error) {
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "manager_role.yaml"))
	if err != nil {
		return nil, err
	}
	var manager rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &manager); err != nil {
		return nil, fmt.Errorf("config/rbac/manager_role.yaml: %w", err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "driftless", Namespace: agentNamespace}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: subject.Name, Namespace: agentNamespace}},
		&manager,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: manager.Name}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: manager.Name}},
		// Everything in the namespace it is bound in.
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: tenantRole},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	expiry := int64(24 * 3600)
	token, err := e.Clientset.CoreV1().ServiceAccounts(agentNamespace).CreateToken(ctx, subject.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for the agent's ServiceAccount: %w", err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = token.Status.Token
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	agent, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	// The API server's authorizer sees the binding a moment later.
	deadline := time.Now().Add(time.Minute)
	for {
		err := agent.List(ctx, &v1alpha1.SyncList{})
		if err == nil {
			return cfg, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the agent's ServiceAccount cannot list Syncs: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newTenant makes tenantAccount in ns, bound there to tenantRole, and
// waits until the API server lets it write ConfigMaps there.
func newTenant(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: tenantAccount, Namespace: ns}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenantAccount, Namespace: ns},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tenantAccount, Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenantRole}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	waitAllowed(t, ns, func(tenant client.Client) error {
		return tenant.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	})
}

// tenantMayWriteClusterWide binds the harness's tenantAccount to
// tenantRole cluster-wide, for tests whose git holds cluster-scoped
// objects (Namespaces, CRDs, ClusterRoles), as a root Sync's does (its
// account, driftless-root, is bound to cluster-admin by config/rbac).
func (h *harness) tenantMayWriteClusterWide() {
	h.t.Helper()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenantRole + "-" + h.ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tenantAccount, Namespace: h.ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenantRole}}
	if err := c.Create(context.Background(), crb); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = c.Delete(context.Background(), crb) })
	waitAllowed(h.t, h.ns, func(tenant client.Client) error {
		return tenant.List(context.Background(), &corev1.NamespaceList{})
	})
}

// waitAllowed waits until try, run as tenantAccount of ns through the
// agent's impersonation, is not forbidden.
func waitAllowed(t *testing.T, ns string, try func(client.Client) error) {
	t.Helper()
	id, err := NewIdentities(testTenancy(), agentClient, agentConfig, client.Options{Scheme: scheme, Mapper: c.RESTMapper()}).For(syncNamed(ns, ""), tenantAccount)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the API server to apply the tenant's binding", func() bool {
		return !apierrors.IsForbidden(try(id.client))
	})
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
	// The agent's own identity with tenancy on, as production runs it:
	// the harness's Syncs are tenants' (no test namespace is the agent's)
	// and act as tenantAccount of their namespace.
	newTenant(t, h.ns)
	h.r = &SyncReconciler{
		Client:        agentClient,
		Reader:        agentClient,
		Applier:       agentClient,
		Identities:    NewIdentities(testTenancy(), agentClient, agentConfig, client.Options{Scheme: scheme, Mapper: c.RESTMapper()}),
		RenderOptions: engine.RenderOptions{Scope: engine.MapperScope{Mapper: c.RESTMapper()}},
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
