package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/charts"
	"github.com/driftless/driftless/internal/testenv"
)

// readsHarness is a tenant harness as the agent runs: Syncs outside the
// agent's namespace, acting as deployer (which may write ConfigMaps of
// its namespace and get no Secret), and the agent's own reader for what
// the agent's Syncs name — which may get every Secret.
func readsHarness(t *testing.T) *harness {
	t.Helper()
	h := tenantHarness(t, Tenancy{AgentNamespace: agentNamespace, FileURLs: true})
	h.r.RenderOptions.Reader = c
	deployer(t, h.ns)
	return h
}

// secretGrant lets deployer get one Secret of its namespace, as a team
// grants what its Sync names (docs/security.md).
type secretGrant struct {
	t       *testing.T
	ns      string
	name    string
	binding *rbacv1.RoleBinding
}

// grantSecret creates the Role that lets deployer get Secret name, and
// binds it.
func grantSecret(t *testing.T, ns, name string) *secretGrant {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-" + name, Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get"}}},
	}
	if err := c.Create(context.Background(), role); err != nil {
		t.Fatal(err)
	}
	g := &secretGrant{t: t, ns: ns, name: name}
	g.bind()
	return g
}

// asDeployer returns the client impersonating deployer of ns.
func asDeployer(t *testing.T, ns string) client.Client {
	t.Helper()
	id, err := NewIdentities(Tenancy{}, c, env.Config, client.Options{Scheme: scheme, Mapper: c.RESTMapper()}).For(syncNamed(ns, ""), "deployer")
	if err != nil {
		t.Fatal(err)
	}
	return id.client
}

func (g *secretGrant) mayGet() bool {
	err := asDeployer(g.t, g.ns).Get(context.Background(), keyOf(g.ns, g.name), &corev1.Secret{})
	return !apierrors.IsForbidden(err)
}

// bind binds the Role to deployer and waits until the API server's
// authorizer lets it get the Secret.
func (g *secretGrant) bind() {
	g.t.Helper()
	g.binding = &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-" + g.name, Namespace: g.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-" + g.name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: g.ns}},
	}
	if err := c.Create(context.Background(), g.binding); err != nil {
		g.t.Fatal(err)
	}
	eventually(g.t, "deployer to be allowed to get Secret "+g.name, g.mayGet)
}

// revoke deletes the binding and waits until deployer is refused.
func (g *secretGrant) revoke() {
	g.t.Helper()
	if err := c.Delete(context.Background(), g.binding); err != nil {
		g.t.Fatal(err)
	}
	eventually(g.t, "deployer to be refused Secret "+g.name, func() bool { return !g.mayGet() })
}

// readCase is one Secret a tenant Sync names, read for it.
type readCase struct {
	name string
	// secret is the Secret the Sync names, which deployer may get only
	// while it is granted.
	secret string
	// setup creates the Secret, commits the first revision and creates
	// the Sync "team" acting as deployer; it returns what the Sync
	// applies, read from the cluster.
	setup func(t *testing.T, h *harness) (applied func() string)
	// first is what the first revision applies.
	first string
	// change makes the next sync apply second: a commit, a new value in
	// the Secret, a chart version published.
	change func(t *testing.T, h *harness)
	second string
	// where is what the message says the Secret is for.
	where string
}

// Every Secret a tenant Sync or its git content names is read as the
// Sync's ServiceAccount: with get on it, the Sync applies as before;
// without, it is Stalled with AccessDenied, naming the identity, the verb
// and the Secret, and nothing of the revision is written — the cluster
// keeps what the last good sync applied, although the agent itself may
// read every Secret. Granted again, the next sync applies the new
// revision.
func TestATenantSyncReadsWhatItNamesAsItsServiceAccount(t *testing.T) {
	for _, tc := range []readCase{
		substituteFromCase(),
		valuesFromCase(),
		chartSecretRefCase(),
		gitSecretRefCase(),
		decryptionCase(),
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := readsHarness(t)
			applied := tc.setup(t, h)
			grant := grantSecret(t, h.ns, tc.secret)

			h.expectReady(h.reconcile("team"))
			if got := applied(); got != tc.first {
				t.Fatalf("with get granted, %q applied, want %q", got, tc.first)
			}

			grant.revoke()
			tc.change(t, h)
			s := h.reconcile("team")
			h.expectFailed(s, v1alpha1.ReasonAccessDenied, tc.where,
				fmt.Sprintf(`serviceaccount %s:deployer may not get secrets %q in namespace %s`, h.ns, tc.secret, h.ns),
				fmt.Sprintf(`grant it get on secrets %q in a Role of namespace %s bound to it`, tc.secret, h.ns))
			if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonAccessDenied {
				t.Errorf("Stalled = %+v, want True with reason AccessDenied", c)
			}
			if got := applied(); got != tc.first {
				t.Errorf("without get, %q is applied, want %q kept: the agent read the Secret with its own rights", got, tc.first)
			}

			grant.bind()
			h.expectReady(h.reconcile("team"))
			if got := applied(); got != tc.second {
				t.Errorf("with get granted again, %q applied, want %q", got, tc.second)
			}
		})
	}
}

// configMapValue returns the value of key of ConfigMap name, "" when it
// does not exist.
func configMapValue(t *testing.T, ns, name, key string) string {
	t.Helper()
	u := get(t, "v1", "ConfigMap", ns, name)
	if u == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(u.Object, "data", key)
	return v
}

func setSecret(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	err := c.Get(ctx, keyOf(ns, name), s)
	switch {
	case apierrors.IsNotFound(err):
		s.StringData = data
		err = c.Create(ctx, s)
	case err == nil:
		s.Data, s.StringData = nil, data
		err = c.Update(ctx, s)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func substituteFromCase() readCase {
	return readCase{
		name: "spec.substituteFrom", secret: "vars", first: "v1", second: "v2",
		where: "spec.substituteFrom[0]",
		setup: func(t *testing.T, h *harness) func() string {
			setSecret(t, h.ns, "vars", map[string]string{"value": "v1"})
			h.repo.Commit(t, "app", map[string]string{"app.yaml": configMapIn(h.ns, "app", "${value}")})
			h.createSync("team", func(s *v1alpha1.Sync) {
				s.Spec.ServiceAccountName = "deployer"
				s.Spec.SubstituteFrom = []v1alpha1.SubstituteReference{{Kind: "Secret", Name: "vars"}}
			})
			return func() string { return configMapValue(t, h.ns, "app", "key") }
		},
		change: func(t *testing.T, h *harness) { setSecret(t, h.ns, "vars", map[string]string{"value": "v2"}) },
	}
}

// colorChart is a chart of the repository whose ConfigMap says the value
// color, and a HelmChart rendering it with more values.
func colorChart(helmChart string) map[string]string {
	return map[string]string{
		"charts/color/Chart.yaml":            "apiVersion: v2\nname: color\nversion: 0.1.0\n",
		"charts/color/values.yaml":           "color: red\n",
		"charts/color/templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: color\ndata:\n  color: {{ .Values.color }}\n  version: {{ .Chart.Version }}\n",
		"apps/color.yaml":                    helmChart,
	}
}

func valuesFromCase() readCase {
	return readCase{
		name: "a HelmChart's valuesFrom", secret: "color-values", first: "green", second: "blue",
		where: "apps/color.yaml",
		setup: func(t *testing.T, h *harness) func() string {
			setSecret(t, h.ns, "color-values", map[string]string{"values.yaml": "color: green\n"})
			h.repo.Commit(t, "chart", colorChart(`apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata: {name: color}
spec:
  chart: {path: charts/color}
  valuesFrom: [{kind: Secret, name: color-values}]
`))
			h.createSync("team", func(s *v1alpha1.Sync) {
				s.Spec.ServiceAccountName = "deployer"
				s.Spec.Paths = []string{"apps"}
			})
			return func() string { return configMapValue(t, h.ns, "color", "color") }
		},
		change: func(t *testing.T, h *harness) {
			setSecret(t, h.ns, "color-values", map[string]string{"values.yaml": "color: blue\n"})
		},
	}
}

func chartSecretRefCase() readCase {
	var repo *testenv.ChartRepo
	return readCase{
		name: "a HelmChart's chart repository secretRef", secret: "chart-creds", first: "1.2.0", second: "1.3.0",
		where: "apps/hello.yaml",
		setup: func(t *testing.T, h *harness) func() string {
			h.r.RenderOptions.ChartCache = &charts.Fetcher{Dir: t.TempDir()}
			repo = testenv.NewChartRepo(t)
			repo.Username, repo.Password = "team", "chart-password"
			repo.Publish("hello", "1.2.0", testenv.PackageChart(t, "hello", "1.2.0"))
			setSecret(t, h.ns, "chart-creds", map[string]string{"username": "team", "password": "chart-password"})
			h.repo.Commit(t, "chart", map[string]string{"apps/hello.yaml": fmt.Sprintf(`apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata: {name: hello}
spec:
  chart:
    repository: %s
    name: hello
    version: ">=1.2 <2"
    secretRef: {name: chart-creds}
`, repo.URL)})
			h.createSync("team", func(s *v1alpha1.Sync) {
				s.Spec.ServiceAccountName = "deployer"
				s.Spec.Paths = []string{"apps"}
			})
			return func() string { return configMapValue(t, h.ns, "hello", "chartVersion") }
		},
		change: func(t *testing.T, h *harness) {
			repo.Publish("hello", "1.3.0", testenv.PackageChart(t, "hello", "1.3.0"))
		},
	}
}

func gitSecretRefCase() readCase {
	return readCase{
		name: "spec.source.git.secretRef", secret: "git-creds", first: "v1", second: "v2",
		where: "git Secret",
		setup: func(t *testing.T, h *harness) func() string {
			h.srv.HTTPUser, h.srv.HTTPPassword = "team", "git-password"
			setSecret(t, h.ns, "git-creds", map[string]string{"username": "team", "password": "git-password"})
			h.repo.Commit(t, "app", map[string]string{"app.yaml": configMapIn(h.ns, "app", "v1")})
			h.createSync("team", func(s *v1alpha1.Sync) {
				s.Spec.ServiceAccountName = "deployer"
				s.Spec.Source.Git.URL = h.repo.HTTPURL()
				s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git-creds"}
			})
			return func() string { return configMapValue(t, h.ns, "app", "key") }
		},
		change: func(t *testing.T, h *harness) {
			h.repo.Commit(t, "v2", map[string]string{"app.yaml": configMapIn(h.ns, "app", "v2")})
		},
	}
}

func decryptionCase() readCase {
	var encrypt func(name, plain, regex string) string
	encrypted := func(h *harness, v string) map[string]string {
		return map[string]string{"app.yaml": encrypt("app.yaml", configMapIn(h.ns, "app", v), "^data$")}
	}
	return readCase{
		name: "spec.decryption.secretRef", secret: "sops-age", first: "v1", second: "v2",
		where: "spec.decryption.secretRef",
		setup: func(t *testing.T, h *harness) func() string {
			encrypt = sopsIdentity(t, h.ns, "sops-age")
			h.repo.Commit(t, "encrypted", encrypted(h, "v1"))
			h.createSync("team", func(s *v1alpha1.Sync) {
				s.Spec.ServiceAccountName = "deployer"
				s.Spec.Decryption = &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-age"}}
			})
			return func() string { return configMapValue(t, h.ns, "app", "key") }
		},
		change: func(t *testing.T, h *harness) { h.repo.Commit(t, "v2", encrypted(h, "v2")) },
	}
}
