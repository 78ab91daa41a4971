package ui_test

import (
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/testenv"
	"github.com/driftless/driftless/internal/ui"
)

// inCluster is the agent's dashboard (agent --ui-bind-address) as a
// browser without JavaScript talks to it: it follows no redirect, and
// sends the session cookie it is given.
type inCluster struct {
	t    *testing.T
	addr string // http://127.0.0.1:port
	// cookie is the session cookie, once signed in.
	cookie *http.Cookie
	// seen is every body the dashboard sent, to look for tokens in.
	seen []string
}

// do sends req to the dashboard (as a page request of a browser when
// accept is text/html) and returns the response and its body.
func (d *inCluster) do(method, path, accept string, form url.Values, header http.Header) (*http.Response, string) {
	d.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, d.addr+path, body)
	if err != nil {
		d.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", d.addr)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if d.cookie != nil {
		req.AddCookie(d.cookie)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	d.seen = append(d.seen, string(b))
	return resp, string(b)
}

func (d *inCluster) page(path string) (*http.Response, string) {
	d.t.Helper()
	return d.do(http.MethodGet, path, "text/html", nil, nil)
}

// signIn posts token to the login form, keeping the session cookie it
// sets.
func (d *inCluster) signIn(token string) {
	d.t.Helper()
	d.cookie = nil
	resp, body := d.do(http.MethodPost, "/login", "text/html", url.Values{"token": {token}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		d.t.Fatalf("sign in: %s, Location %q, want 303 to /:\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == ui.SessionCookie {
			if !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode {
				d.t.Errorf("the session cookie is %q: want HttpOnly, Secure and SameSite=Strict", resp.Header.Get("Set-Cookie"))
			}
			d.cookie = &http.Cookie{Name: ck.Name, Value: ck.Value}
		}
	}
	if d.cookie == nil {
		d.t.Fatalf("sign in set no %s cookie: %q", ui.SessionCookie, resp.Header.Values("Set-Cookie"))
	}
}

// freeAddress is a loopback address whose port was free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// serviceAccountToken creates the ServiceAccount name in ns, bound to a
// Role of rules there (none: no rights), and returns a token of it from
// the API server (TokenRequest).
func serviceAccountToken(t *testing.T, ns, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	objs := []client.Object{sa}
	if len(rules) > 0 {
		objs = append(objs, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestInClusterDashboardServesOnlyWhatEachViewersTokenAllows runs an
// agent with --ui-bind-address and reads its dashboard with no token, a
// token the API server refuses, and the real ServiceAccount tokens of
// three people: one with no rights, one who may read the Sync, one who
// may also patch it (but not read its ConfigMap).
func TestInClusterDashboardServesOnlyWhatEachViewersTokenAllows(t *testing.T) {
	addr := freeAddress(t)
	f := newFixtureWith(t, func(o *agent.Options) { o.UIAddr = addr; o.ClusterName = "prod-eu" })
	read := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs", "inventories"}, Verbs: []string{"get", "list", "watch"}}
	events := rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}}
	patch := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs"}, Verbs: []string{"patch"}}
	nobody := serviceAccountToken(t, f.ns, "nobody")
	reader := serviceAccountToken(t, f.ns, "reader", read, events)
	operator := serviceAccountToken(t, f.ns, "operator", read, events, patch)

	d := &inCluster{t: t, addr: "http://" + addr}
	syncPath := "/c/prod-eu/syncs/" + f.ns + "/web"
	testenv.Eventually(t, time.Minute, "the dashboard answers", func() string {
		resp, err := http.Get(d.addr + "/login")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return ""
	})

	// No token: a browser is sent to the login page, anything else is
	// refused with 401.
	for _, path := range []string{"/", syncPath} {
		if resp, body := d.page(path); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("GET %s without a token: %s, Location %q; want 303 to /login\n%s", path, resp.Status, resp.Header.Get("Location"), body)
		}
	}
	if resp, body := d.do(http.MethodGet, "/live", "text/event-stream", nil, nil); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "sign in") {
		t.Errorf("GET /live without a token: %s %q; want 401 saying to sign in", resp.Status, body)
	}
	if resp, body := d.page("/login"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) || !strings.Contains(body, `method="post"`) {
		t.Errorf("GET /login: %s; want a form that posts a token\n%s", resp.Status, body)
	}
	if resp, body := d.do(http.MethodPost, syncPath+"/suspend", "", url.Values{"confirm": {"yes"}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST suspend without a token: %s; want 401\n%s", resp.Status, body)
	}

	// A token the API server does not accept.
	bad := "eyJhbGciOiJSUzI1NiJ9.not-a-token.at-all"
	if resp, body := d.do(http.MethodGet, "/", "", nil, http.Header{"Authorization": {"Bearer " + bad}}); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "did not accept") {
		t.Errorf("GET / with a bad bearer token: %s %q; want 401 saying the API server did not accept it", resp.Status, body)
	}
	if resp, body := d.do(http.MethodPost, "/login", "text/html", url.Values{"token": {bad}}, nil); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(body, "did not accept this token") || len(resp.Cookies()) != 0 {
		t.Errorf("sign in with a bad token: %s, cookies %v; want 401 saying the token was not accepted, and no cookie\n%s", resp.Status, resp.Cookies(), body)
	}
	d.cookie = &http.Cookie{Name: ui.SessionCookie, Value: bad}
	if resp, _ := d.page("/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?why=expired" {
		t.Errorf("GET / with a bad session cookie: %s, Location %q; want 303 to /login?why=expired", resp.Status, resp.Header.Get("Location"))
	}
	if _, body := d.page("/login?why=expired"); !strings.Contains(body, "did not accept your token") {
		t.Errorf("the login page after a refused session does not say why:\n%s", body)
	}

	// A real token of a ServiceAccount without rights: signed in, and
	// refused each view, saying what to ask for.
	d.signIn(nobody)
	resp, body := d.page(syncPath)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(html.UnescapeString(body), "system:serviceaccount:"+f.ns+":nobody may not get the Sync "+f.ns+"/web") {
		t.Errorf("GET the Sync page as nobody: %s; want 403 saying nobody may not get the Sync\n%s", resp.Status, body)
	}
	if _, body := d.page("/"); strings.Contains(body, `href="`+syncPath+`"`) || !strings.Contains(html.UnescapeString(body), "may not list Syncs") {
		t.Errorf("the fleet page shows nobody the Sync, or does not say nobody may not list Syncs:\n%s", body)
	}

	// The operator: sees the fleet and the Sync, reads as themselves (the
	// agent may read the ConfigMap; the operator may not).
	d.signIn(operator)
	if resp, body := d.page("/"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="`+syncPath+`"`) ||
		!strings.Contains(body, "system:serviceaccount:"+f.ns+":operator") {
		t.Errorf("the fleet page as the operator: %s; want the Sync's link and who is signed in\n%s", resp.Status, body)
	}
	if resp, body := d.page(syncPath); resp.StatusCode != http.StatusOK || !strings.Contains(body, "web-config") {
		t.Errorf("the Sync page as the operator: %s; want its objects\n%s", resp.Status, body)
	}
	objectPath := syncPath + "/object?" + url.Values{"version": {"v1"}, "kind": {"ConfigMap"}, "namespace": {f.ns}, "name": {"web-config"}}.Encode()
	if _, body := d.page(objectPath); !strings.Contains(html.UnescapeString(body), `User "system:serviceaccount:`+f.ns+`:operator" cannot get resource "configmaps"`) {
		t.Errorf("the object page does not read the ConfigMap as the operator (who may not):\n%s", body)
	}

	// An action needs the session's CSRF token.
	_, confirm := d.page(syncPath + "/suspend")
	m := csrfField.FindStringSubmatch(confirm)
	if m == nil {
		t.Fatalf("the confirmation page has no CSRF token:\n%s", confirm)
	}
	if resp, body := d.do(http.MethodPost, syncPath+"/suspend", "text/html", url.Values{"confirm": {"yes"}}, nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("POST suspend without the CSRF token: %s; want 403 naming the CSRF token\n%s", resp.Status, body)
	}
	if resp, _ := d.do(http.MethodPost, syncPath+"/suspend", "text/html", url.Values{"confirm": {"yes"}, "csrf": {"forged"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST suspend with a forged CSRF token: %s; want 403", resp.Status)
	}
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), f.key, &s); err != nil || s.Spec.Suspend {
		t.Fatalf("a refused POST suspended the Sync (err %v)", err)
	}
	if resp, body := d.do(http.MethodPost, syncPath+"/suspend", "text/html", url.Values{"confirm": {"yes"}, "csrf": {html.UnescapeString(m[1])}}, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Suspended") {
		t.Errorf("POST suspend with the CSRF token, as the operator: %s; want it done\n%s", resp.Status, body)
	}
	if err := c.Get(context.Background(), f.key, &s); err != nil || !s.Spec.Suspend {
		t.Errorf("the operator's confirmed suspend did not suspend the Sync (err %v)", err)
	}

	// The reader may look but not act.
	d.signIn(reader)
	if resp, body := d.page(syncPath); resp.StatusCode != http.StatusOK {
		t.Errorf("the Sync page as the reader: %s\n%s", resp.Status, body)
	}
	_, confirm = d.page(syncPath + "/resume")
	m = csrfField.FindStringSubmatch(confirm)
	if m == nil {
		t.Fatalf("the confirmation page has no CSRF token:\n%s", confirm)
	}
	if resp, body := d.do(http.MethodPost, syncPath+"/resume", "text/html", url.Values{"confirm": {"yes"}, "csrf": {html.UnescapeString(m[1])}}, nil); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(html.UnescapeString(body), "reader may not patch the Sync") {
		t.Errorf("POST resume as the reader: %s; want 403 saying the reader may not patch it\n%s", resp.Status, body)
	}
	if err := c.Get(context.Background(), f.key, &s); err != nil || !s.Spec.Suspend {
		t.Errorf("the reader's refused resume resumed the Sync (err %v)", err)
	}

	// An Authorization header works as well as the cookie.
	d.cookie = nil
	if resp, body := d.do(http.MethodGet, syncPath, "text/html", nil, http.Header{"Authorization": {"Bearer " + operator}}); resp.StatusCode != http.StatusOK {
		t.Errorf("the Sync page with the operator's token in an Authorization header: %s\n%s", resp.Status, body)
	}

	// No token is ever in a page.
	for _, b := range d.seen {
		for name, token := range map[string]string{"nobody": nobody, "reader": reader, "operator": operator, "bad": bad} {
			if strings.Contains(b, token) {
				t.Errorf("a page holds %s's token:\n%s", name, b)
			}
		}
	}
}

// TestInClusterDashboardInABrowserSignsInWithAPastedToken drives Chromium
// to the agent's dashboard over plain HTTP on 127.0.0.1 (as through
// kubectl port-forward): it lands on the login page, a pasted token signs
// in (the Secure cookie is kept for a loopback address), the fleet and
// the Sync follow, and signing out returns to the login page. The login
// page passes axe-core.
func TestInClusterDashboardInABrowserSignsInWithAPastedToken(t *testing.T) {
	ctx := browser(t, 1280)
	addr := freeAddress(t)
	f := newFixtureWith(t, func(o *agent.Options) { o.UIAddr = addr; o.ClusterName = "prod-eu" })
	read := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs", "inventories"}, Verbs: []string{"get", "list", "watch"}}
	token := serviceAccountToken(t, f.ns, "reader", read)
	base := "http://" + addr
	syncPath := "/c/prod-eu/syncs/" + f.ns + "/web"
	testenv.Eventually(t, time.Minute, "the dashboard answers", func() string {
		resp, err := http.Get(base + "/login")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return ""
	})
	do(t, ctx, "open the dashboard: the login page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	checkAccessible(t, ctx, "login")
	do(t, ctx, "sign in with the token", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="`+syncPath+`"]`)))
	if got := text(t, ctx); !strings.Contains(got, "Signed in as system:serviceaccount:"+f.ns+":reader") {
		t.Errorf("the fleet does not say who is signed in:\n%s", got)
	}
	do(t, ctx, "open the Sync", chromedp.Click(chromedp.CSS(`a[href="`+syncPath+`"]`)), chromedp.WaitVisible(chromedp.CSS("#h-drift")))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("livestate").textContent.startsWith("Live:")`)); err != nil {
		t.Fatalf("the Sync page's live stream did not open with the session cookie: %v\n%s", err, text(t, ctx))
	}
	do(t, ctx, "sign out", chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#token")))
	do(t, ctx, "open the Sync again", chromedp.Navigate(base+syncPath), chromedp.WaitVisible(chromedp.CSS("#token")))
}
