package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/syncview"
	"github.com/driftless/driftless/internal/testenv"
	"github.com/driftless/driftless/internal/ui"
)

// A platform team's agent runs in cluster A and drives cluster B, which
// runs no agent: a tenant's Sync in A names a kubeconfig Secret of B
// (spec.kubeConfig). The agent runs as production runs it: as its own
// ServiceAccount with config/rbac's rights, tenancy on, the Sync acting as
// its tenant's ServiceAccount — impersonated in B by B's kubeconfig user.
func TestSyncAppliesToARemoteCluster(t *testing.T) {
	ctx := context.Background()
	b, cb := startCluster(t, "B")

	agentNS := env.Namespace(t)
	ns := env.Namespace(t)
	agentCfg := agentIdentityIn(t, agentNS)
	tenantIn(t, c, ns, "tenant", true)
	tenantIn(t, c, ns, "no-secrets", false)
	// In B the tenant's account (a user name only: B has no such
	// ServiceAccount) may write its namespace.
	if err := cb.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	tenantIn(t, cb, ns, "tenant", true)
	kubeconfig := remoteKubeconfig(t, b, cb)
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-b"},
		Data: map[string][]byte{"value": kubeconfig}})

	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "web config", map[string]string{"apps/config.yaml": agenttest.ConfigMap(ns, "web-config", "v1")})
	agent := agenttest.Start(t, agenttest.Options(t, agentCfg, agentNS))
	var web *v1alpha1.Sync
	agent.Eventually("the Sync is created (the agent installs its CRD as it starts)", func() string {
		web = remoteSync(ns, "web", repo.HTTPURL(), "tenant", "cluster-b")
		if err := c.Create(ctx, web); err != nil {
			return err.Error()
		}
		return ""
	})
	key := client.ObjectKeyFromObject(web)
	greeting := func(cl client.Client) string {
		var cm corev1.ConfigMap
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &cm); err != nil {
			return "(" + err.Error() + ")"
		}
		return cm.Data["greeting"]
	}

	elsewhere, accepted := blackHole(t)
	kubeconfigElsewhere := []byte(strings.Replace(string(kubeconfig), strings.TrimPrefix(b.ControlPlane.APIServerURL, "https://"), elsewhere, 1))

	t.Run("a Sync in cluster A applies to cluster B", func(t *testing.T) {
		agent.Eventually("the Sync is Ready at the first commit", agenttest.AppliedAt(c, key, first))
		if got := greeting(cb); got != "v1" {
			t.Errorf("greeting in B = %q, want v1", got)
		}
		if got := greeting(c); !strings.Contains(got, "not found") {
			t.Errorf("greeting in A = %q, want no ConfigMap in A", got)
		}
		var inv v1alpha1.Inventory
		if err := c.Get(ctx, key, &inv); err != nil {
			t.Errorf("the Sync's Inventory is not in A: %v", err)
		}
		// get and tree name the cluster the Sync applies to.
		kubeconfig := env.ControlPlane.KubeconfigPath()
		server := "https://" + strings.TrimPrefix(b.ControlPlane.APIServerURL, "https://")
		if out := runCLI(t, "get", "syncs", "-n", ns, "--kubeconfig", kubeconfig).expect(t, 0).out; !strings.Contains(out, "CLUSTER") || !strings.Contains(out, server) {
			t.Errorf("get syncs does not show the cluster %s:\n%s", server, out)
		}
		out := runCLI(t, "tree", key.String(), "--kubeconfig", kubeconfig).expect(t, 0).out
		if !strings.Contains(out, "in cluster "+server) {
			t.Errorf("tree does not name the cluster %s:\n%s", server, out)
		}
		// tree and explain read the objects in B, where they are.
		if !regexp.MustCompile(`ConfigMap/web-config +Current +apps/config.yaml`).MatchString(out) {
			t.Errorf("tree does not show the ConfigMap's health and origin as B has them:\n%s", out)
		}
		out = runCLI(t, "explain", "configmap/web-config", "-n", ns, "--kubeconfig", kubeconfig).expect(t, 0).out
		for _, want := range []string{"In cluster:", server, "Sync " + key.String(), "apps/config.yaml"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain does not say %q of the ConfigMap in B:\n%s", want, out)
			}
		}
		// A viewer who may read the Sync but not the kubeconfig Secret is
		// told so, and sees the cluster named.
		out = runCLI(t, "tree", key.String(), "--kubeconfig", viewerKubeconfig(t, ns)).expect(t, 0).out
		for _, want := range []string{"Secret " + ns + "/cluster-b, which you may not read", "in cluster " + server, "Unknown"} {
			if !strings.Contains(out, want) {
				t.Errorf("tree as a viewer without get on the Secret does not say %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, remoteToken) {
			t.Errorf("tree prints the kubeconfig's token:\n%s", out)
		}
		// A kubeconfig that names a server the agent has not synced the
		// Sync to is not connected to.
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-elsewhere"},
			Data: map[string][]byte{"value": kubeconfigElsewhere}})
		unsynced := remoteSync(ns, "unsynced", repo.HTTPURL(), "tenant", "cluster-elsewhere")
		unsynced.Spec.Suspend = true
		mustCreate(t, c, unsynced)
		out = runCLI(t, "tree", client.ObjectKeyFromObject(unsynced).String(), "--kubeconfig", kubeconfig).expect(t, 0).out
		if !strings.Contains(out, "has not synced to the cluster of its kubeconfig") || accepted() != 0 {
			t.Errorf("tree of a Sync never synced: %d connections to its kubeconfig's server, want none and a line saying why:\n%s", accepted(), out)
		}
	})

	t.Run("the dashboard names cluster B and reads the Sync's objects there", func(t *testing.T) {
		addr := serveDashboard(t, env.Config)
		server := "https://" + strings.TrimPrefix(b.ControlPlane.APIServerURL, "https://")
		syncPage := "/c/a/syncs/" + ns + "/web"
		pages := map[string][]string{
			"/":      {"applies to " + server, syncPage},
			syncPage: {"Applies to cluster <code>" + server, ns + "/cluster-b", "ConfigMap/web-config", "Current", "apps/config.yaml"},
			syncPage + "/object?group=&version=v1&kind=ConfigMap&namespace=" + ns + "&name=web-config": {"In cluster <code>" + server, "Current", "data.greeting"},
		}
		for path, wants := range pages {
			agent.Eventually("GET "+path+" shows the target cluster", func() string {
				body := httpGet(t, addr+path)
				if strings.Contains(body, remoteToken) || strings.Contains(body, "certificate-authority-data") {
					t.Fatalf("GET %s shows the kubeconfig:\n%s", path, body)
				}
				for _, want := range wants {
					if !strings.Contains(body, want) {
						return fmt.Sprintf("it does not say %q:\n%s", want, body)
					}
				}
				return ""
			})
		}
	})

	t.Run("the views connect through no proxy the agent did not use", func(t *testing.T) {
		var synced v1alpha1.Sync
		agent.Eventually("the Sync records cluster B", func() string {
			if err := c.Get(ctx, key, &synced); err != nil {
				return err.Error()
			}
			if synced.Status.Cluster == "" {
				return "status.cluster is empty"
			}
			return ""
		})
		kc, err := clientcmd.Load(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kc.Clusters["b"].ProxyURL = "http://" + elsewhere
		proxied, err := clientcmd.Write(*kc)
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-b-proxied"},
			Data: map[string][]byte{"value": proxied}})
		// The Sync as a view sees it once its kubeconfig names a proxy the
		// agent has not connected through (the agent did it directly).
		view := synced.DeepCopy()
		view.Spec.KubeConfig.SecretRef.Name = "cluster-b-proxied"
		before := accepted()
		if _, _, err := syncview.TargetReader(ctx, c, view); err == nil || !strings.Contains(err.Error(), "now reaches it through proxy http://"+elsewhere) {
			t.Errorf("TargetReader = %v, want a refusal naming the proxy the agent did not use", err)
		}
		if n := accepted() - before; n != 0 {
			t.Errorf("the view connected to the proxy the agent did not use %d times", n)
		}
		// Once the agent has reached the cluster through it (and checked
		// it), the view goes the same way.
		view.Status.ClusterProxy = "http://" + elsewhere
		if _, _, err := syncview.TargetReader(ctx, c, view); err != nil {
			t.Errorf("TargetReader through the proxy the agent used = %v, want a client", err)
		}
	})

	t.Run("a hand edit in B is reverted, saying who made it", func(t *testing.T) {
		var cm corev1.ConfigMap
		if err := cb.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["greeting"] = "edited"
		if err := cb.Update(ctx, &cm, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		agent.Eventually("the edit in B is put back and recorded with its author", func() string {
			if got := greeting(cb); got != "v1" {
				return "greeting in B = " + got
			}
			var s v1alpha1.Sync
			if err := c.Get(ctx, key, &s); err != nil {
				return err.Error()
			}
			for _, inc := range s.Status.Drift {
				if inc.Action == v1alpha1.DriftReverted && strings.Contains(inc.Message, "kubectl-edit") {
					return ""
				}
			}
			return fmt.Sprintf("no reverted incident naming kubectl-edit: %+v", s.Status.Drift)
		})
	})

	t.Run("diff --sync compares with B, where the objects are", func(t *testing.T) {
		kubeconfig := env.ControlPlane.KubeconfigPath()
		// In sync: nothing to show (before, every object showed as to be
		// created, compared with A).
		runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
		// Suspended, a hand edit in B stays, and the diff shows it.
		setSuspend := func(suspend bool) {
			var s v1alpha1.Sync
			if err := c.Get(ctx, key, &s); err != nil {
				t.Fatal(err)
			}
			s.Spec.Suspend = suspend
			if err := c.Update(ctx, &s); err != nil {
				t.Fatal(err)
			}
		}
		setSuspend(true)
		var cm corev1.ConfigMap
		if err := cb.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["greeting"] = "edited-while-suspended"
		if err := cb.Update(ctx, &cm, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		d := runDiffCommand(t, "--sync", key.String(), "--kubeconfig", kubeconfig, "-o", "json").expect(t, 1).json(t)
		if len(d.Changes) != 1 || d.Changes[0].Action != "update" || !strings.Contains(d.Changes[0].ID, "web-config") || !strings.Contains(d.Changes[0].Diff, "edited-while-suspended") {
			t.Errorf("diff --sync of a Sync of B after a hand edit in B: %+v, want one update of web-config showing the edit", d.Changes)
		}
		setSuspend(false)
		agent.Eventually("the edit is put back once the Sync is resumed", func() string {
			if got := greeting(cb); got != "v1" {
				return "greeting in B = " + got
			}
			return ""
		})
	})

	t.Run("B unreachable: ClusterUnreachable naming its server, nothing deleted; B back: converges", func(t *testing.T) {
		if err := b.ControlPlane.StopComponent(testenv.APIServer); err != nil {
			t.Fatal(err)
		}
		restarted := false
		t.Cleanup(func() {
			if !restarted {
				_ = b.ControlPlane.StartComponent(ctx, testenv.APIServer)
			}
		})
		second := repo.Commit(t, "web config v2", map[string]string{"apps/config.yaml": agenttest.ConfigMap(ns, "web-config", "v2")})
		server := strings.TrimPrefix(b.ControlPlane.APIServerURL, "https://")
		agent.Eventually("the Sync says B is unreachable", func() string {
			var s v1alpha1.Sync
			if err := c.Get(ctx, key, &s); err != nil {
				return err.Error()
			}
			ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Reason != v1alpha1.ReasonClusterUnreachable {
				return fmt.Sprintf("Ready = %+v", ready)
			}
			if !strings.Contains(ready.Message, server) {
				return "the message does not name B's server " + server + ": " + ready.Message
			}
			if strings.Contains(ready.Message, remoteToken) || strings.Contains(ready.Message, "BEGIN") {
				t.Errorf("the message quotes the kubeconfig's credentials: %s", ready.Message)
			}
			if s.Status.LastAppliedRevision != first {
				return "lastAppliedRevision moved to " + s.Status.LastAppliedRevision
			}
			return ""
		})
		var inv v1alpha1.Inventory
		if err := c.Get(ctx, key, &inv); err != nil {
			t.Errorf("the Sync's Inventory in A is gone while B is down: %v", err)
		}

		if err := b.ControlPlane.StartComponent(ctx, testenv.APIServer); err != nil {
			t.Fatal(err)
		}
		restarted = true
		agent.Eventually("the Sync is Ready at the second commit once B is back", agenttest.AppliedAt(c, key, second))
		if got := greeting(cb); got != "v2" {
			t.Errorf("greeting in B = %q, want v2", got)
		}
	})

	t.Run("a kubeconfig with an exec plugin is refused, naming the Secret", func(t *testing.T) {
		exec := strings.Replace(string(kubeconfig), "    token: "+remoteToken,
			"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /usr/local/bin/get-a-token-4d2a", 1)
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-b-exec"},
			Data: map[string][]byte{"value": []byte(exec)}})
		s := remoteSync(ns, "exec", repo.HTTPURL(), "tenant", "cluster-b-exec")
		mustCreate(t, c, s)
		agent.Eventually("the Sync is refused", remoteSyncRefused(client.ObjectKeyFromObject(s), v1alpha1.ReasonInvalidSpec,
			"Secret "+ns+"/cluster-b-exec", "exec plugin"))
		var got v1alpha1.Sync
		if err := c.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
			t.Fatal(err)
		}
		if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; strings.Contains(msg, "get-a-token-4d2a") {
			t.Errorf("the message quotes the kubeconfig: %s", msg)
		}
	})

	t.Run("the kubeconfig is read as the Sync, not with the agent's rights", func(t *testing.T) {
		s := remoteSync(ns, "no-secrets", repo.HTTPURL(), "no-secrets", "cluster-b")
		mustCreate(t, c, s)
		agent.Eventually("the Sync is refused", remoteSyncRefused(client.ObjectKeyFromObject(s), v1alpha1.ReasonAccessDenied,
			"serviceaccount "+ns+":no-secrets may not get secrets \"cluster-b\""))
	})
}

// startCluster starts a control plane of its own for the test, named
// name in messages, and returns it with an admin client of it.
func startCluster(t *testing.T, name string) (*testenv.Env, client.Client) {
	t.Helper()
	e, err := testenv.StartWith(context.Background(), testenv.Options{})
	if err != nil {
		t.Fatalf("start cluster %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	cl, err := client.New(e.Config, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return e, cl
}

// remoteToken is what remoteKubeconfig's token is replaced with in
// messages' checks: the token itself.
var remoteToken string

// remoteKubeconfig makes, in cluster b, the identity the agent uses
// there, as docs/remote-clusters.md says: a ServiceAccount that may
// impersonate ServiceAccounts (with the agent's user extra) and read any
// object for the drift watches, and returns a kubeconfig with a token of
// it.
func remoteKubeconfig(t *testing.T, b *testenv.Env, cb client.Client) []byte {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "driftless-remote"}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "driftless-remote"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/" + v1alpha1.AgentExtraKey}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "driftless-remote"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, role, binding} {
		mustCreate(t, cb, obj)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	tr, err := b.Clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remoteToken = tr.Status.Token
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["b"] = &clientcmdapi.Cluster{Server: b.ControlPlane.APIServerURL, CertificateAuthorityData: b.Config.CAData}
	cfg.AuthInfos["driftless"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["b"] = &clientcmdapi.Context{Cluster: "b", AuthInfo: "driftless"}
	cfg.CurrentContext = "b"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// serveDashboard serves the dashboard of cfg's cluster, as context "a",
// until the test ends, and returns its address.
func serveDashboard(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	s, err := ui.New(ui.Options{Clusters: []ui.Cluster{{Name: "a", Config: cfg}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = s.Run(ctx) }()
	srv := httptest.NewServer(s.Handler(nil))
	t.Cleanup(func() { srv.Close(); cancel() })
	return srv.URL
}

// httpGet returns the body at url, or why there is none.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	return resp.Status + "\n" + string(body)
}

// viewerKubeconfig writes a kubeconfig of the test cluster whose user is
// a ServiceAccount of namespace that may read its Syncs and Inventories,
// and nothing else.
func viewerKubeconfig(t *testing.T, namespace string) string {
	t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs", "inventories"}, Verbs: []string{"get", "list"}}}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "viewer"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "viewer"}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: "viewer"}}},
	} {
		mustCreate(t, c, obj)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	tr, err := env.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "viewer", tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["a"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["viewer"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["a"] = &clientcmdapi.Context{Cluster: "a", AuthInfo: "viewer", Namespace: namespace}
	cfg.CurrentContext = "a"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentIdentityIn makes the agent's ServiceAccount in namespace with the
// rights config/rbac gives it (its subjects moved to namespace), and
// returns a config with a token the API server issued for it.
func agentIdentityIn(t *testing.T, namespace string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	objs, err := config.Manifests("rbac")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		clusterScoped := o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding"
		if clusterScoped {
			o.SetName(o.GetName() + "-" + namespace)
		} else {
			o.SetNamespace(namespace)
		}
		if subjects, ok, _ := unstructured.NestedSlice(o.Object, "subjects"); ok {
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = namespace
			}
			_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
		}
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); kind == "ClusterRole" && ref != "cluster-admin" {
			_ = unstructured.SetNestedField(o.Object, ref+"-"+namespace, "roleRef", "name")
		}
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if clusterScoped {
			t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	tr, err = env.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "driftless", tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// tenantIn makes a ServiceAccount of namespace, bound there to a Role that
// may do anything (secrets) or anything but read Secrets (!secrets).
func tenantIn(t *testing.T, cl client.Client, namespace, name string, secrets bool) {
	t.Helper()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	if !secrets {
		rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}
	}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}}},
	} {
		mustCreate(t, cl, obj)
	}
}

func mustCreate(t *testing.T, cl client.Client, obj client.Object) {
	t.Helper()
	if err := cl.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func remoteSync(ns, name, url, serviceAccount, secret string) *v1alpha1.Sync {
	return &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.SyncSpec{
			Source:             v1alpha1.Source{Git: v1alpha1.GitSource{URL: url, Branch: "main"}},
			Paths:              []string{"apps"},
			Interval:           metav1.Duration{Duration: 2 * time.Second},
			ServiceAccountName: serviceAccount,
			KubeConfig:         &v1alpha1.KubeConfigReference{SecretRef: v1alpha1.SecretKeyReference{Name: secret}},
		},
	}
}

func remoteSyncRefused(key client.ObjectKey, reason string, says ...string) func() string {
	return func() string {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), key, &s); err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Reason != reason {
			return fmt.Sprintf("Ready = %+v, want reason %s", ready, reason)
		}
		for _, want := range says {
			if !strings.Contains(ready.Message, want) {
				return fmt.Sprintf("the message does not say %q: %s", want, ready.Message)
			}
		}
		return ""
	}
}
