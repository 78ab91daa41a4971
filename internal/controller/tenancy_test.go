package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// agentNamespace is the agent's namespace in these tests: no test
// namespace is it, so every Sync of a harness is a tenant's.
const agentNamespace = "driftless-system"

// tenantHarness is a harness whose reconciler fences Syncs as the agent
// does, with t (file:// stays allowed: the test git server's other
// addresses need credentials).
func tenantHarness(t *testing.T, tenancy Tenancy) *harness {
	t.Helper()
	h := newHarness(t)
	h.r.Identities = NewIdentities(tenancy, agentClient, agentConfig, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
	return h
}

// deployer creates the ServiceAccount deployer in ns, bound to a Role
// that lets it write ConfigMaps, Deployments and Services in ns only, and
// returns its RoleBinding.
func deployer(t *testing.T, ns string) *rbacv1.RoleBinding {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	// What the built-in ClusterRole edit grants for these kinds; edit
	// itself is empty here: its rules are aggregated by the controller
	// manager, which the test control plane does not run.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"", "apps"}, Resources: []string{"configmaps", "deployments", "services"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	if err := c.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}},
	}
	if err := c.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	// The API server's authorizer sees the binding a moment later.
	id, err := NewIdentities(Tenancy{}, c, env.Config, client.Options{Scheme: scheme, Mapper: c.RESTMapper()}).For(syncNamed(ns, ""), "deployer")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the API server to apply the binding", func() bool {
		return !apierrors.IsForbidden(id.client.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)))
	})
	return rb
}

func escalation(ns string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %s-escalate
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: deployer, namespace: %s}
`, ns, ns)
}

func configMapIn(ns, name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  key: %q\n", name, ns, value)
}

// A team's Sync whose git holds a ClusterRoleBinding to cluster-admin and
// an object in kube-system is refused as a whole: its ServiceAccount may
// write only its namespace, validation runs as that account before any
// write, so not even its own ConfigMap is written, and the status names
// each refused object, the verb and the identity.
func TestATenantSyncCannotEscapeItsServiceAccount(t *testing.T) {
	h := tenantHarness(t, Tenancy{AgentNamespace: agentNamespace, FileURLs: true})
	deployer(t, h.ns)
	sys := h.ns + "-planted"
	h.repo.Commit(t, "escalate", map[string]string{
		"crb.yaml":    escalation(h.ns),
		"system.yaml": configMapIn("kube-system", sys, "x"),
		"app.yaml":    configMapIn(h.ns, "app", "v1"),
	})
	h.createSync("team", func(s *v1alpha1.Sync) { s.Spec.ServiceAccountName = "deployer" })

	s := h.reconcile("team")
	who := "serviceaccount " + h.ns + ":deployer may not"
	h.expectFailed(s, v1alpha1.ReasonValidationFailed, "nothing was applied",
		who+` get clusterrolebindings.rbac.authorization.k8s.io "`+h.ns+`-escalate" (cluster-scoped)`,
		who+` get configmaps "`+sys+`" in namespace kube-system`,
		"grant it in a Role/ClusterRole, or move the object to a Sync that may")
	if !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionStalled) {
		t.Errorf("Stalled is not True: %+v", s.Status.Conditions)
	}
	if get(t, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", h.ns+"-escalate") != nil {
		t.Error("the ClusterRoleBinding to cluster-admin was written")
	}
	if get(t, "v1", "ConfigMap", "kube-system", sys) != nil {
		t.Error("the ConfigMap in kube-system was written")
	}
	if get(t, "v1", "ConfigMap", h.ns, "app") != nil {
		t.Error("the team's own ConfigMap was written although the revision was refused")
	}

	// Without the two objects its account may not write, the revision is
	// applied: the account may write its namespace.
	rev := h.repo.Commit(t, "only the team's", map[string]string{"crb.yaml": "", "system.yaml": ""})
	s = h.reconcile("team")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != rev || get(t, "v1", "ConfigMap", h.ns, "app") == nil {
		t.Errorf("the team's ConfigMap was not applied at %s: %+v", rev, ready(s))
	}
}

// The agent's own namespace keeps the agent's identity; elsewhere a Sync
// must name a ServiceAccount or get the agent's default one.
func TestATenantSyncNeedsAServiceAccount(t *testing.T) {
	t.Run("without one and no default it is stalled and told what to set", func(t *testing.T) {
		h := tenantHarness(t, Tenancy{AgentNamespace: agentNamespace, FileURLs: true})
		h.repo.Commit(t, "app", map[string]string{"app.yaml": configMapIn(h.ns, "app", "v1")})
		h.createSync("team", nil)
		s := h.reconcile("team")
		h.expectFailed(s, v1alpha1.ReasonServiceAccountRequired, "set spec.serviceAccountName", "--default-service-account")
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue ||
			c.Reason != v1alpha1.ReasonServiceAccountRequired {
			t.Errorf("Stalled = %+v, want True with reason ServiceAccountRequired", c)
		}
		if get(t, "v1", "ConfigMap", h.ns, "app") != nil {
			t.Error("a Sync without an identity wrote its objects")
		}
	})
	t.Run("the default ServiceAccount is the one acted as", func(t *testing.T) {
		h := tenantHarness(t, Tenancy{AgentNamespace: agentNamespace, DefaultServiceAccount: "deployer", FileURLs: true})
		deployer(t, h.ns)
		h.repo.Commit(t, "escalate", map[string]string{"crb.yaml": escalation(h.ns)})
		h.createSync("team", nil)
		h.expectFailed(h.reconcile("team"), v1alpha1.ReasonValidationFailed, "serviceaccount "+h.ns+":deployer may not get clusterrolebindings")
	})
	t.Run("in the agent's namespace it acts as the agent", func(t *testing.T) {
		h := newHarness(t)
		// Admin as the agent: this case is about whom a Sync of the
		// agent's namespace acts as, and its git holds a binding to
		// cluster-admin, which only an agent that is cluster-admin may
		// write (config/rbac gives the agent no such right; the root Sync
		// acts as driftless-root).
		h.r.Applier = c
		h.r.Identities = NewIdentities(Tenancy{AgentNamespace: h.ns}, c, env.Config, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
		h.repo.Commit(t, "crb", map[string]string{"crb.yaml": escalation(h.ns)})
		h.createSync("root", nil)
		t.Cleanup(func() {
			_ = c.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: h.ns + "-escalate"}})
		})
		h.expectReady(h.reconcile("root"))
	})
}

// What a tenant Sync may name is fenced before anything is fetched.
func TestATenantSyncMayNotNameWhatIsNotItsOwn(t *testing.T) {
	tests := []struct {
		name    string
		tenancy Tenancy
		mutate  func(s *v1alpha1.Sync)
		want    string // "" for no refusal
	}{
		{"a file:// source is refused", Tenancy{AgentNamespace: agentNamespace}, nil,
			"spec.source.git.url"},
		{"a file:// source is allowed with --allow-file-urls", Tenancy{AgentNamespace: agentNamespace, FileURLs: true}, nil, ""},
		{"a dependency in another namespace is refused", Tenancy{AgentNamespace: agentNamespace, FileURLs: true},
			func(s *v1alpha1.Sync) {
				s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "infra", Namespace: "platform"}}
			},
			`spec.dependsOn[0].namespace "platform"`},
		{"a dependency in another namespace is allowed with --no-cross-namespace-refs=false",
			Tenancy{AgentNamespace: agentNamespace, FileURLs: true, CrossNamespaceRefs: true},
			func(s *v1alpha1.Sync) {
				s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "infra", Namespace: "platform"}}
			}, ""},
		{"a dependency in its own namespace, named, is allowed", Tenancy{AgentNamespace: agentNamespace, FileURLs: true},
			func(s *v1alpha1.Sync) {
				s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "infra", Namespace: "team-a"}}
			}, ""},
		{"a repository on a host --tenant-source-hosts does not list is refused", Tenancy{AgentNamespace: agentNamespace, SourceHosts: sourceHosts(t, "github.com,*.corp.example")},
			func(s *v1alpha1.Sync) { s.Spec.Source.Git.URL = "https://169.254.169.254/latest/meta-data.git" },
			"host 169.254.169.254, which a Sync outside the agent's namespace may not fetch from (the agent's --tenant-source-hosts allows github.com,*.corp.example)"},
		{"an OCI Sync's dependency in another namespace is refused as a git Sync's is", Tenancy{AgentNamespace: agentNamespace},
			func(s *v1alpha1.Sync) {
				s.Spec.Source = v1alpha1.Source{OCI: &v1alpha1.OCISource{URL: "oci://registry.example/team-a/apps"}}
				s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "infra", Namespace: "platform"}}
			},
			`spec.dependsOn[0].namespace "platform"`},
		{"a repository on a listed host is allowed", Tenancy{AgentNamespace: agentNamespace, SourceHosts: sourceHosts(t, "github.com,*.corp.example")},
			func(s *v1alpha1.Sync) { s.Spec.Source.Git.URL = "https://git.corp.example/team-a/apps.git" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
				Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: "file:///srv/git/fleet.git"}}}}
			if tt.mutate != nil {
				tt.mutate(s)
			}
			err := checkSpec(s, &tt.tenancy)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error = %v, want one naming %s", err, tt.want)
			}
			// The agent's namespace is never fenced.
			s.Namespace = agentNamespace
			if err := checkSpec(s, &tt.tenancy); err != nil {
				t.Errorf("a Sync in the agent's namespace is refused: %v", err)
			}
		})
	}

	t.Run("a refused Sync's source is asked nothing when it is woken or its images are updated", func(t *testing.T) {
		r := &SyncReconciler{CacheDir: t.TempDir(), Store: NewStore(),
			Identities: NewIdentities(Tenancy{AgentNamespace: agentNamespace, SourceHosts: sourceHosts(t, "github.com")}, c, env.Config, client.Options{Scheme: scheme})}
		s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
			Spec: v1alpha1.SyncSpec{ServiceAccountName: "deployer", Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: "https://127.0.0.1:1/team-a/apps.git"}}}}
		r.wakePriorities(context.Background(), []WakeUp{{Sync: s}})
		if n := r.Mirror().Stats().Resolves; n != 0 {
			t.Errorf("a woken Sync on a host --tenant-source-hosts refuses cost %d ls-remotes of it, want none", n)
		}
		// The image update controller reads through ReaderOf first.
		var refused *source.HostNotAllowedError
		if _, err := r.ReaderOf(s); !errors.As(err, &refused) {
			t.Errorf("ReaderOf = %v, want the host refused", err)
		}
	})

	t.Run("the refusal is InvalidSpec on the Sync", func(t *testing.T) {
		h := tenantHarness(t, Tenancy{AgentNamespace: agentNamespace})
		h.repo.Commit(t, "app", map[string]string{"app.yaml": configMapIn(h.ns, "app", "v1")})
		h.createSync("team", func(s *v1alpha1.Sync) { s.Spec.ServiceAccountName = "deployer" })
		h.expectFailed(h.reconcile("team"), v1alpha1.ReasonInvalidSpec, "--allow-file-urls")
	})
}

// A drift revert is the Sync's own write: done as its ServiceAccount, so
// once the account loses its rights a hand edit stays, and the Sync says
// why.
func TestADriftRevertActsAsTheSyncsServiceAccount(t *testing.T) {
	h := newHarness(t)
	binding := deployer(t, h.ns)
	rev := h.repo.Commit(t, "app", map[string]string{"app.yaml": configMapIn(h.ns, "app", "v1")})
	h.createSync("team", func(s *v1alpha1.Sync) {
		s.Spec.ServiceAccountName = "deployer"
		s.Spec.Interval = metav1.Duration{Duration: time.Hour}
	})
	startAgentWith(t, func(o *Options) {
		o.Tenancy = &Tenancy{AgentNamespace: agentNamespace, FileURLs: true}
	})
	h.waitReady("team", rev)

	setValue := func(v string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := c.Get(context.Background(), keyOf(h.ns, "app"), cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["key"] = v
		if err := c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
	}
	value := func() string {
		u := get(t, "v1", "ConfigMap", h.ns, "app")
		v, _, _ := unstructured.NestedString(u.Object, "data", "key")
		return v
	}
	setValue("edited")
	eventually(t, "the edit reverted while the account may write", func() bool { return value() == "v1" })

	if err := c.Delete(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
	asDeployer := NewIdentities(Tenancy{}, c, env.Config, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
	id, err := asDeployer.For(h.syncNow("team"), "deployer")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the API server to deny the account", func() bool {
		return apierrors.IsForbidden(id.client.Get(context.Background(), keyOf(h.ns, "app"), &corev1.ConfigMap{}))
	})
	setValue("edited again")
	eventually(t, "the Sync to say why the edit stays", func() bool {
		cond := meta.FindStatusCondition(h.syncNow("team").Status.Conditions, v1alpha1.ConditionDrifted)
		return cond != nil && cond.Status == metav1.ConditionTrue &&
			strings.Contains(cond.Message, "not reverted: serviceaccount "+h.ns+":deployer may not")
	})
	if v := value(); v != "edited again" {
		t.Errorf("value = %q: reverted although the Sync's account may not write", v)
	}
}

// The API server itself refuses a git address of another scheme.
func TestTheAPIServerRefusesGitURLsOfOtherSchemes(t *testing.T) {
	ns := env.Namespace(t)
	for _, url := range []string{"ftp://example.com/fleet.git", "https//github.com/example/fleet.git", "relative/fleet.git"} {
		s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "fleet-"},
			Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: url}}}}
		err := c.Create(context.Background(), s)
		if err == nil || !strings.Contains(err.Error(), "url must start with ssh://, https://") {
			t.Errorf("creating a Sync of %s: %v, want a refusal naming the allowed schemes", url, err)
		}
	}
	for _, url := range []string{"ssh://git@example.com/fleet.git", "HTTPS://example.com/fleet.git", "git@example.com:org/fleet.git",
		"file:///srv/git/fleet.git", "/srv/git/fleet.git", "git://example.com/fleet.git"} {
		s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "fleet-"},
			Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: url}}}}
		if err := c.Create(context.Background(), s, client.DryRunAll); err != nil {
			t.Errorf("creating a Sync of %s: %v", url, err)
		}
	}
}

func syncNamed(ns, name string) *v1alpha1.Sync {
	return &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func sourceHosts(t *testing.T, patterns string) source.Hosts {
	t.Helper()
	h, err := source.ParseHosts(strings.Split(patterns, ","))
	if err != nil {
		t.Fatal(err)
	}
	return h
}
