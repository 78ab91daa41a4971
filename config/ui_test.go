package config_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent/agenttest"
)

// config/ui is config/default plus the dashboard: the flag and port on
// the agent, a Service, and the ClusterRole that reviews tokens,
// authorises viewers and impersonates them, and nothing else.
func TestUIKustomizationServesTheDashboardWithOnlyTheRightsItUses(t *testing.T) {
	objs := buildDir(t, "ui")
	d := find[*appsv1.Deployment](t, objs, namespace, "driftless")
	agent := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(agent.Args, "--ui-bind-address=:9394") {
		t.Errorf("the agent's args %q lack --ui-bind-address=:9394", agent.Args)
	}
	if !slices.ContainsFunc(agent.Ports, func(p corev1.ContainerPort) bool { return p.Name == "dashboard" && p.ContainerPort == 9394 }) {
		t.Errorf("the agent's ports %+v lack dashboard 9394", agent.Ports)
	}
	svc := find[*corev1.Service](t, objs, namespace, "driftless-dashboard")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.FromString("dashboard") {
		t.Errorf("Service driftless-dashboard ports %+v, want one to the dashboard port", svc.Spec.Ports)
	}
	want := []rbacv1.PolicyRule{
		// ui.authenticator.review: who each request's token is.
		rule("authentication.k8s.io", "tokenreviews", "create"),
		// ui.authenticator.authorize: may the viewer get, list or patch Syncs.
		rule("authorization.k8s.io", "subjectaccessreviews", "create"),
		// ui.authenticator.clientAs: every other read and write as the viewer.
		rule("", "users,groups", "impersonate"),
		// ... with the viewer's UID and extras (userextras/KEY, any key).
		rule("authentication.k8s.io", "*", "impersonate"),
	}
	if diff := cmp.Diff(want, find[*rbacv1.ClusterRole](t, objs, "", "driftless-dashboard").Rules); diff != "" {
		t.Errorf("ClusterRole driftless-dashboard rules (-want +got):\n%s", diff)
	}
	b := find[*rbacv1.ClusterRoleBinding](t, objs, "", "driftless-dashboard")
	if b.RoleRef.Name != "driftless-dashboard" || len(b.Subjects) != 1 || b.Subjects[0].Name != "driftless" || b.Subjects[0].Namespace != namespace {
		t.Errorf("ClusterRoleBinding driftless-dashboard binds %s to %+v", b.RoleRef.Name, b.Subjects)
	}
	// config/default serves no dashboard.
	for _, o := range build(t) {
		if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == "driftless-dashboard" {
			t.Error("config/default binds the dashboard's ClusterRole; it is off by default")
		}
	}
}

// The agent, with a real token of its ServiceAccount bound to
// config/ui's RBAC only, serves the dashboard to a viewer (a
// ServiceAccount of a team, its token in an Authorization header): it
// reviews the token, authorises the viewer, reads and suspends the Sync
// as the viewer (impersonating its user and groups).
func TestTheDashboardRunsWithOnlyTheShippedRBAC(t *testing.T) {
	ctx := context.Background()
	cl := syncClient(t)
	ns := env.Namespace(t)
	team := env.Namespace(t)
	installRBACOf(t, cl, ns, "ui")
	mustCreate(t, cl,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: team}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: team},
			Rules: []rbacv1.PolicyRule{rule("driftless.dev", "syncs,inventories", "get,list,watch,patch")}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: team},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "operator"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "operator", Namespace: team}}},
	)
	agentCfg := rest.AnonymousClientConfig(env.Config)
	agentCfg.BearerToken = saToken(t, ns, "driftless")
	viewer := saToken(t, team, "operator")

	addr := freeAddr(t)
	opts := agenttest.Options(t, agentCfg, ns)
	opts.UIAddr, opts.ClusterName = addr, "here"
	a := agenttest.Start(t, opts)
	sync := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: team}, Spec: v1alpha1.SyncSpec{
		Source:   v1alpha1.Source{Git: v1alpha1.GitSource{URL: "https://example.invalid/apps.git", Branch: "main"}},
		Interval: metav1.Duration{Duration: time.Hour}, Suspend: false, ServiceAccountName: "operator"}}
	a.Eventually("the Sync CRD is installed", func() string {
		if err := cl.Create(ctx, sync.DeepCopy()); err != nil {
			return err.Error()
		}
		return ""
	})
	syncPath := "/c/here/syncs/" + team + "/app"
	request := func(method, path string) (int, string) {
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader("confirm=yes"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+viewer)
		req.Header.Set("Origin", "http://"+addr)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	a.Eventually("the fleet shows the team's Sync to its operator", func() string {
		code, body := request(http.MethodGet, "/")
		if code != http.StatusOK || !strings.Contains(body, `href="`+syncPath+`"`) {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
	if code, body := request(http.MethodGet, syncPath); code != http.StatusOK {
		t.Errorf("the Sync page as the operator: %d\n%s", code, body)
	}
	if code, body := request(http.MethodPost, syncPath+"/suspend"); code != http.StatusOK || !strings.Contains(body, "Suspended") {
		t.Errorf("suspend as the operator: %d\n%s", code, body)
	}
	var got v1alpha1.Sync
	if err := cl.Get(ctx, client.ObjectKeyFromObject(sync), &got); err != nil || !got.Spec.Suspend {
		t.Errorf("the operator's suspend did not suspend the Sync (err %v)", err)
	}
}

// saToken is a token of the ServiceAccount ns/name (TokenRequest).
func saToken(t *testing.T, ns, name string) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
