package ui_test

import (
	"context"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/cli"
	"github.com/driftless/driftless/internal/testenv"
)

// handTypedSecret is what a hand edit writes into the fixture's Secret;
// no page may show it either.
const handTypedSecret = "hand-typed-secret-88c2d0"

// TestDashboardPagesShowTheSyncItsObjectsAndDriftButNoSecretValue runs
// `driftless ui` over two contexts of a cluster whose Sync a real agent
// synced, after hand edits of a ConfigMap and a Secret that the agent put
// back, and reads every page as a browser without JavaScript would.
func TestDashboardPagesShowTheSyncItsObjectsAndDriftButNoSecretValue(t *testing.T) {
	f := newFixture(t)
	f.handEdit(t, "bonjour")
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "web-key"}, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["key"] = []byte(handTypedSecret)
	if err := c.Update(context.Background(), &secret, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the agent records both hand edits", func() string {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), f.key, &s); err != nil {
			return err.Error()
		}
		var objects []string
		for _, d := range s.Status.Drift {
			objects = append(objects, d.Object)
		}
		if !strings.Contains(strings.Join(objects, " "), "ConfigMap/") || !strings.Contains(strings.Join(objects, " "), "Secret/") {
			return "drift incidents: " + strings.Join(objects, ", ")
		}
		return ""
	})
	addr, _ := dashboard(t, kubeconfig(t))

	pages := map[string]string{}
	read := func(path string) string {
		t.Helper()
		resp, body := get(t, addr, path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		for h, want := range map[string]string{
			"Content-Security-Policy": "frame-ancestors 'none'",
			"X-Content-Type-Options":  "nosniff",
		} {
			if got := resp.Header.Get(h); !strings.Contains(got, want) {
				t.Errorf("GET %s: %s = %q, want it to hold %q", path, h, got, want)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q is not strict", path, csp)
		}
		pages[path] = body
		return body
	}

	fleet := read("/")
	syncPath := "/c/admin/syncs/" + f.ns + "/web"
	for _, want := range []string{`href="` + syncPath + `"`, `href="/c/viewer/syncs/` + f.ns + `/web"`, "web: the greeting and its key"} {
		if !strings.Contains(fleet, want) {
			t.Errorf("the fleet page lacks %q:\n%s", want, fleet)
		}
	}
	if failing := read("/?status=failing"); strings.Contains(failing, syncPath) {
		t.Errorf("the fleet page filtered to failing Syncs lists the Ready Sync web")
	}
	if other := read("/?cluster=viewer&namespace=" + url.QueryEscape(f.ns)); strings.Contains(other, syncPath) || !strings.Contains(other, "/c/viewer/syncs/"+f.ns+"/web") {
		t.Errorf("the fleet page filtered to context viewer shows admin's row or lacks viewer's:\n%s", other)
	}

	page := read(syncPath)
	for _, want := range []string{"web-config", "apps/config.yaml", "data.greeting", "hello → bonjour", "kubectl-edit", "Drift incidents", "History", "Events"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Sync page lacks %q", want)
		}
	}
	objectLinks := regexp.MustCompile(`href="(`+regexp.QuoteMeta(syncPath)+`/object\?[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(objectLinks) < 2 {
		t.Fatalf("the Sync page links %d object pages, want the ConfigMap's and the Secret's:\n%s", len(objectLinks), page)
	}
	for _, l := range objectLinks {
		path := strings.ReplaceAll(l[1], "&amp;", "&")
		body := read(path)
		if !strings.Contains(body, "Field owners") || !strings.Contains(body, "driftless") {
			t.Errorf("the object page %s lacks its field owners:\n%s", path, body)
		}
	}

	for path, body := range pages {
		for _, v := range []string{secretValue, handTypedSecret} {
			for _, enc := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
				if strings.Contains(body, enc) {
					t.Errorf("GET %s shows a Secret value (%q)", path, enc)
				}
			}
		}
	}
}

// TestDashboardActionsAreConfirmedFromItsOwnPagesAndMadeAsTheViewer posts
// the suspend form as another site would, unconfirmed, as a viewer RBAC
// refuses, and as the admin: only the last suspends the Sync. Then hand
// edits stay, and the object pages show what the next sync would change.
func TestDashboardActionsAreConfirmedFromItsOwnPagesAndMadeAsTheViewer(t *testing.T) {
	f := newFixture(t)
	addr, _ := dashboard(t, kubeconfig(t))
	post := func(context, origin string, form url.Values) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, addr+"/c/"+context+"/syncs/"+f.ns+"/web/suspend", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := local.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	suspended := func() bool {
		t.Helper()
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), f.key, &s); err != nil {
			t.Fatal(err)
		}
		return s.Spec.Suspend
	}
	confirmed := url.Values{"confirm": {"yes"}}

	if code, body := post("admin", "", confirmed); code != http.StatusForbidden || suspended() {
		t.Errorf("a POST without Origin: %d %s; suspended = %v, want 403 and not suspended", code, body, suspended())
	}
	if code, body := post("admin", "http://evil.example", confirmed); code != http.StatusForbidden || suspended() {
		t.Errorf("a POST from another site: %d %s; suspended = %v, want 403 and not suspended", code, body, suspended())
	}
	if code, body := post("admin", addr, nil); code != http.StatusBadRequest || suspended() {
		t.Errorf("an unconfirmed POST: %d %s; suspended = %v, want 400 and not suspended", code, body, suspended())
	}
	code, body := post("viewer", addr, confirmed)
	if code != http.StatusForbidden || !strings.Contains(body, `User &#34;viewer&#34; cannot patch resource &#34;syncs&#34;`) || suspended() {
		t.Errorf("the viewer's POST: %d, suspended = %v, want 403 with the API server's refusal and not suspended:\n%s", code, suspended(), body)
	}
	if code, body := post("admin", addr, confirmed); code != http.StatusOK || !suspended() {
		t.Errorf("the admin's confirmed POST: %d, suspended = %v, want 200 and suspended:\n%s", code, suspended(), body)
	}

	// Suspended, the Sync leaves hand edits alone: the object pages show
	// what the next sync would change, Secret values masked.
	f.handEdit(t, "hola")
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "web-key"}, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["key"] = []byte(handTypedSecret)
	if err := c.Update(context.Background(), &secret, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	object := func(kind, name string) string {
		t.Helper()
		q := url.Values{"kind": {kind}, "version": {"v1"}, "namespace": {f.ns}, "name": {name}}
		resp, body := get(t, addr, "/c/admin/syncs/"+f.ns+"/web/object?"+q.Encode())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the %s page: %s\n%s", kind, resp.Status, body)
		}
		return html.UnescapeString(body)
	}
	if page := object("ConfigMap", "web-config"); !strings.Contains(page, "-  greeting: hola") || !strings.Contains(page, "+  greeting: hello") {
		t.Errorf("the ConfigMap's page does not show the hand edit the next sync would put back:\n%s", page)
	}
	page := object("Secret", "web-key")
	if !strings.Contains(page, "***") {
		t.Errorf("the Secret's page does not show its masked change:\n%s", page)
	}
	for _, v := range []string{secretValue, handTypedSecret, base64.StdEncoding.EncodeToString([]byte(secretValue)), base64.StdEncoding.EncodeToString([]byte(handTypedSecret))} {
		if strings.Contains(page, v) {
			t.Errorf("the Secret's page shows a Secret value (%q)", v)
		}
	}

	// A page asked for by another name (DNS rebinding) is refused.
	req, _ := http.NewRequest(http.MethodGet, addr+"/", nil)
	req.Host = "rebound.example:" + strings.TrimPrefix(addr[strings.LastIndex(addr, ":"):], ":")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for Host %s: %s, want 421", req.Host, resp.Status)
	}
}

func TestUIRefusesAnAddressThatIsNotLoopback(t *testing.T) {
	var out, errOut strings.Builder
	code := cli.Execute([]string{"ui", "--address", "0.0.0.0:9393"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "not a loopback address") {
		t.Errorf("driftless ui --address 0.0.0.0:9393: exit %d, stderr %q; want 2 saying it is not loopback", code, errOut.String())
	}
}

// TestDashboardListsAgainAContextThatFailedUntilItAnswers starts the
// dashboard while the viewer may not list Syncs: the fleet shows the
// viewer context as refused since when; once the viewer is granted the
// right, the same dashboard, not restarted, shows the viewer's Syncs.
func TestDashboardListsAgainAContextThatFailedUntilItAnswers(t *testing.T) {
	f := newFixture(t)
	path := kubeconfig(t)
	ctx := context.Background()
	var bindings rbacv1.ClusterRoleBindingList
	if err := c.List(ctx, &bindings); err != nil {
		t.Fatal(err)
	}
	var grant *rbacv1.ClusterRoleBinding
	for i := range bindings.Items {
		if b := &bindings.Items[i]; strings.HasPrefix(b.Name, "ui-viewer-") && strings.Contains(b.Name, "listsagain") {
			grant = b
		}
	}
	if grant == nil {
		t.Fatal("no viewer binding for this test")
	}
	if err := c.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	addr, _ := dashboard(t, path)
	viewerLink := `href="/c/viewer/syncs/` + f.ns + `/web"`
	testenv.Eventually(t, time.Minute, "the fleet says since when the viewer context is refused", func() string {
		_, body := get(t, addr, "/")
		if !regexp.MustCompile(`<strong>viewer</strong>: refused since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, retrying: .*forbidden`).MatchString(html.UnescapeString(body)) {
			return body
		}
		return ""
	})
	grant = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: grant.Name}, RoleRef: grant.RoleRef, Subjects: grant.Subjects}
	if err := c.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the fleet shows the viewer's Sync without a restart", func() string {
		_, body := get(t, addr, "/")
		if !strings.Contains(body, viewerLink) || strings.Contains(body, "refused since") {
			return body
		}
		return ""
	})
}
