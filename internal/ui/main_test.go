package ui_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/cli"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env *testenv.Env
	// c reads and writes as the cluster's admin.
	c client.Client
)

func TestMain(m *testing.M) { testenv.MainWith(m, &env, setup) }

func setup(e *testenv.Env) error {
	var err error
	c, err = adminClient(e)
	return err
}

// adminClient is a client of e's admin that knows Syncs.
func adminClient(e *testenv.Env) (client.Client, error) {
	scheme := testenv.Scheme()
	return client.New(e.Config, client.Options{Scheme: scheme})
}

// secretValue is the value of the Secret the fixture's git holds; no page
// may show it.
const secretValue = "ui-secret-value-4e1f9c"

// fixture is a tenant's Sync, synced by a real agent from a real git
// server: a ConfigMap and a Secret in the tenant's namespace.
type fixture struct {
	ns   string
	key  client.ObjectKey
	repo *testenv.Repo
	// c is the admin's client of the fixture's cluster.
	c client.Client
}

// newFixture starts an agent as production runs it (tenancy on: the Sync
// acts as the tenant's ServiceAccount, which may do anything in its
// namespace only), creates the Sync web and waits until it is Ready.
func newFixture(t *testing.T) fixture { t.Helper(); return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with the agent's options changed by opts
// (when not nil) before it starts.
func newFixtureWith(t *testing.T, opts func(*agent.Options)) fixture {
	t.Helper()
	return newFixtureIn(t, env, c, opts)
}

// newFixtureIn is newFixtureWith in the cluster of e, whose admin's
// client is c.
func newFixtureIn(t *testing.T, env *testenv.Env, c client.Client, opts func(*agent.Options)) fixture {
	t.Helper()
	ctx := context.Background()
	agentNS := env.Namespace(t)
	ns := env.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "web: the greeting and its key", map[string]string{
		"apps/config.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\n  namespace: %s\ndata:\n  greeting: hello\n", ns),
		"apps/secret.yaml": fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: web-key\n  namespace: %s\nstringData:\n  key: %s\n", ns, secretValue),
	})
	o := agenttest.Options(t, env.Config, agentNS)
	if opts != nil {
		opts(&o)
	}
	a := agenttest.Start(t, o)
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:             v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.HTTPURL(), Branch: "main"}},
			Paths:              []string{"apps"},
			Interval:           metav1.Duration{Duration: time.Hour},
			ServiceAccountName: sa.Name,
		},
	}
	a.Eventually("the Sync is created (the agent installs its CRD as it starts)", func() string {
		if err := c.Create(ctx, s); err != nil {
			return err.Error()
		}
		return ""
	})
	key := client.ObjectKeyFromObject(s)
	a.Eventually("the Sync is Ready", func() string {
		var got v1alpha1.Sync
		if err := c.Get(ctx, key, &got); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
			return fmt.Sprintf("conditions: %+v", got.Status.Conditions)
		}
		return ""
	})
	return fixture{ns: ns, key: key, repo: repo, c: c}
}

// handEdit changes the ConfigMap's greeting as `kubectl edit` would, as a
// user of its own (the manager name kubectl uses), so that the agent puts
// it back and records a drift incident.
func (f fixture) handEdit(t *testing.T, greeting string) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "web-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = greeting
	if err := f.c.Update(context.Background(), &cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
}

// kubeconfig writes a kubeconfig with two contexts of the test's
// cluster: admin (system:masters) and viewer, a user who may read Syncs,
// their Inventories, Events and the tenant's objects but write nothing.
func kubeconfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	viewerRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ui-viewer-" + strings.ToLower(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-"))},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs", "inventories"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events", "configmaps"}, Verbs: []string{"get", "list", "watch"}},
		}}
	viewerBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: viewerRole.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: viewerRole.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "viewer"}}}
	for _, obj := range []client.Object{viewerRole, viewerBinding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	viewerPath, err := env.UserKubeconfig("viewer")
	if err != nil {
		t.Fatal(err)
	}
	return mergeKubeconfigs(t, "admin", map[string]string{"admin": env.ControlPlane.KubeconfigPath(), "viewer": viewerPath})
}

// mergeKubeconfigs writes a kubeconfig with a context of each name, the
// current context of the kubeconfig file it names, and returns its path;
// current is its current context.
func mergeKubeconfigs(t *testing.T, current string, files map[string]string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for name, file := range files {
		k, err := clientcmd.LoadFromFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cur := k.Contexts[k.CurrentContext]
		cfg.Clusters[name] = k.Clusters[cur.Cluster]
		cfg.AuthInfos[name] = k.AuthInfos[cur.AuthInfo]
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = current
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// dashboard runs `driftless ui --all-contexts` with kubeconfig on a free
// loopback port until the test ends, opens the URL it printed with the
// tests' client (local, whose cookie jar keeps the session), and returns
// its address (http://127.0.0.1:port) and that URL, which a browser opens
// first.
func dashboard(t *testing.T, kubeconfig string) (addr, printed string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var errOut syncBuffer
	cmd := cli.NewRootCommand(pw, &errOut)
	cmd.SetArgs([]string{"ui", "--kubeconfig", kubeconfig, "--all-contexts", "--address", "127.0.0.1:0"})
	go func() {
		defer close(done)
		defer pw.Close()
		if err := cmd.ExecuteContext(ctx); err != nil {
			fmt.Fprintf(&errOut, "driftless ui: %v\n", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("driftless ui printed no address; stderr: %s", errOut.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?token=[A-Za-z0-9_-]{32,}`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("driftless ui printed %q, no address with its token", lines.Text())
	}
	addr, printed = m[1], m[0]
	resp, err := local.Get(printed)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != addr+"/" {
		t.Fatalf("open %s: %s at %s, want 200 at %s/ (the token dropped from the URL)", printed, resp.Status, resp.Request.URL, addr)
	}
	return addr, printed
}

// local is the tests' client of `driftless ui`: its cookie jar keeps the
// session cookie of each dashboard, set when dashboard opens the URL it
// printed.
var local = func() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		panic(err)
	}
	return &http.Client{Jar: jar}
}()

// get fetches path of the dashboard at addr, as local, and returns the
// response and its body.
func get(t *testing.T, addr, path string) (*http.Response, string) {
	t.Helper()
	resp, err := local.Get(addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
