package ui_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/syncview"
	"github.com/driftless/driftless/internal/testenv"
	"github.com/driftless/driftless/internal/ui"
)

// Rules a viewer of the fixture's Sync is given.
var (
	readSyncs  = rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs", "inventories"}, Verbs: []string{"get", "list", "watch"}}
	readEvents = rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}}
	patchSyncs = rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs"}, Verbs: []string{"patch"}}
)

// inClusterServer serves the in-cluster dashboard in-process as the agent
// does (ui.Server.Serve, with the admin's identity standing for the
// agent's) with auth's other fields and the clock now (nil: time.Now),
// until the test ends; it returns its address.
func inClusterServer(t *testing.T, auth ui.Auth, now func() time.Time) string {
	t.Helper()
	auth.Client, auth.Config = c, env.Config
	srv, err := ui.New(ui.Options{Clusters: []ui.Cluster{{Name: "prod-eu", Config: env.Config}}, Auth: &auth, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve the dashboard: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// moreTokens returns n more tokens of the ServiceAccount name in ns.
func moreTokens(t *testing.T, ns, name string, n int) []string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, n)
	for i := range tokens {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = tr.Status.Token
	}
	return tokens
}

// sseEvent is one event of a live stream as a browser's EventSource
// reads it.
type sseEvent struct {
	Type, Data string
	// Fields are the names of the fields the event was made of.
	Fields []string
}

// sseLines splits a stream into lines as the HTML standard's event
// stream parser does: a line ends at CR, LF or CRLF.
func sseLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF && len(data) > 0:
		return len(data), data, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\r' && i+1 == len(data) && !atEOF:
		return 0, nil, nil // a CRLF may be split between reads
	case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
		return i + 2, data[:i], nil
	}
	return i + 1, data[:i], nil
}

// parseEvents parses r as an EventSource does and sends each event it
// dispatches (comments left out), closing events when r ends.
func parseEvents(r io.Reader, events chan<- sseEvent) {
	defer close(events)
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 0, 64<<10), 16<<20)
	lines.Split(sseLines)
	var ev sseEvent
	var data []string
	for lines.Scan() {
		line := lines.Text()
		if line == "" {
			if len(ev.Fields) > 0 {
				ev.Data = strings.Join(data, "\n")
				events <- ev
			}
			ev, data = sseEvent{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		ev.Fields = append(ev.Fields, field)
		switch field {
		case "event":
			ev.Type = value
		case "data":
			data = append(data, value)
		}
	}
}

// liveStream opens the live stream path of the dashboard at addr as an
// EventSource would, with header; the channel receives its events and is
// closed when the dashboard ends the stream.
func liveStream(t *testing.T, addr, path string, header http.Header) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := local.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("open the stream %s: %s\n%s", path, resp.Status, b)
	}
	events := make(chan sseEvent, 64)
	go func() {
		defer resp.Body.Close()
		parseEvents(resp.Body, events)
	}()
	return events
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// firstEvent waits for the stream's next event.
func firstEvent(t *testing.T, what string, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatalf("%s: the stream ended before its first event", what)
		}
		return ev
	case <-time.After(time.Minute):
		t.Fatalf("%s: no event within a minute", what)
	}
	return sseEvent{}
}

// streamEnds waits for the dashboard to end the stream, and returns the
// events it still sent.
func streamEnds(t *testing.T, what string, events <-chan sseEvent) []sseEvent {
	t.Helper()
	var sent []sseEvent
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return sent
			}
			sent = append(sent, ev)
		case <-deadline:
			t.Fatalf("%s: the stream is still open a minute later (it sent %d more events)", what, len(sent))
		}
	}
}

// TestInClusterLiveStreamsEndWhenTheViewerLosesTheRight opens a Sync's
// and the fleet's live streams as two viewers, then takes away the first
// one's RoleBinding and the second one's ServiceAccount: both streams end
// once the reviews expire. A stream also ends when it has lasted
// StreamLife, though its viewer still may read, and opens again.
func TestInClusterLiveStreamsEndWhenTheViewerLosesTheRight(t *testing.T) {
	f := newFixture(t)
	addr := inClusterServer(t, ui.Auth{ReviewTTL: time.Second}, nil)
	reader := serviceAccountToken(t, f.ns, "reader", readSyncs, readEvents)
	leaver := serviceAccountToken(t, f.ns, "leaver", readSyncs, readEvents)
	syncPath := "/c/prod-eu/syncs/" + f.ns + "/web"

	syncStream := liveStream(t, addr, syncPath+"/live", bearer(reader))
	fleetStream := liveStream(t, addr, "/live", bearer(leaver))
	if ev := firstEvent(t, "the Sync's stream", syncStream); !strings.Contains(ev.Data, "h-drift") {
		t.Fatalf("the Sync's stream sent %+v, want its live region", ev)
	}
	if ev := firstEvent(t, "the fleet's stream", fleetStream); !strings.Contains(ev.Data, `href="`+syncPath+`"`) {
		t.Fatalf("the fleet's stream sent %+v, want the Sync's row", ev)
	}

	ctx := context.Background()
	if err := c.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "reader"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "leaver"}}); err != nil {
		t.Fatal(err)
	}
	f.handEdit(t, "seen-by-nobody")
	streamEnds(t, "the Sync's stream of a viewer whose RoleBinding is gone", syncStream)
	streamEnds(t, "the fleet's stream of a viewer whose ServiceAccount is gone", fleetStream)
	resp, _ := (&inCluster{t: t, addr: addr}).do(http.MethodGet, syncPath+"/live", "text/event-stream", nil, bearer(reader))
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the Sync's stream opened again without the RoleBinding: %s, want 403", resp.Status)
	}

	short := inClusterServer(t, ui.Auth{StreamLife: 2 * time.Second}, nil)
	operator := serviceAccountToken(t, f.ns, "operator", readSyncs, readEvents)
	firstEvent(t, "a stream of a viewer who keeps the right", liveStream(t, short, syncPath+"/live", bearer(operator)))
	streamEnds(t, "a stream older than StreamLife", liveStream(t, short, syncPath+"/live", bearer(operator)))
	firstEvent(t, "the stream opened again", liveStream(t, short, syncPath+"/live", bearer(operator)))
}

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestInClusterSignInLimitServesEveryRealViewerBehindOneProxy sends, as
// the Ingress in front of the dashboard forwards them, 50 garbage tokens
// from one client, then the tokens of 20 real viewers from others: every
// viewer is served. So is a neighbour of the attacker (same address)
// whose token was accepted before, and a client's own X-Forwarded-For
// does not free it from the limit.
func TestInClusterSignInLimitServesEveryRealViewerBehindOneProxy(t *testing.T) {
	f := newFixture(t)
	clk := &clock{t: time.Now()}
	addr := inClusterServer(t, ui.Auth{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, ReviewTTL: time.Second}, clk.now)
	first := serviceAccountToken(t, f.ns, "viewer", readSyncs, readEvents)
	viewers := moreTokens(t, f.ns, "viewer", 20)
	d := &inCluster{t: t, addr: addr}
	from := func(token, client string) int {
		t.Helper()
		h := bearer(token)
		h.Set("X-Forwarded-For", client)
		resp, _ := d.do(http.MethodGet, "/", "", nil, h)
		return resp.StatusCode
	}
	const attacker = "203.0.113.9"
	if code := from(first, attacker); code != http.StatusOK {
		t.Fatalf("the attacker's neighbour, before the attack: %d, want 200", code)
	}
	codes := map[int]int{}
	for i := range 50 {
		codes[from(fmt.Sprintf("garbage-%d", i), attacker)]++
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("50 garbage tokens from one client: %v, want the last ones refused with 429", codes)
	}
	if code := from("garbage-again", "198.51.100.77, "+attacker); code != http.StatusTooManyRequests {
		t.Errorf("the attacker naming another address in its own X-Forwarded-For: %d, want 429", code)
	}
	clk.advance(2 * time.Second) // every review has expired; the limit has not refilled
	if code := from(first, attacker); code != http.StatusOK {
		t.Errorf("the attacker's neighbour, whose token was accepted before the attack: %d, want 200", code)
	}
	for i, token := range viewers {
		if code := from(token, fmt.Sprintf("198.51.100.%d", i+1)); code != http.StatusOK {
			t.Errorf("viewer %d through the same proxy: %d, want 200", i+1, code)
		}
	}
}

// TestInClusterDashboardRefusesAnOversizedBodyAndWritesNothing posts a
// 10 MiB form to the login page without a token, as anyone may: it is
// refused with 413 and nothing is written to the temporary directory.
func TestInClusterDashboardRefusesAnOversizedBodyAndWritesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	addr := inClusterServer(t, ui.Auth{}, nil)
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	if err := form.WriteField("token", "not-a-token"); err != nil {
		t.Fatal(err)
	}
	part, err := form.CreateFormFile("upload", "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := part.Write(bytes.Repeat([]byte("x"), 10<<20)); err != nil {
		t.Fatal(err)
	}
	if err := form.Close(); err != nil {
		t.Fatal(err)
	}
	post := func(what, contentType string, body io.Reader) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, addr+"/login", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Origin", addr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST /login with %s: %s, want 413", what, resp.Status)
		}
	}
	post("a 10 MiB multipart form", form.FormDataContentType(), bytes.NewReader(body.Bytes()))
	// Without a length, the body is read until it is too long.
	post("a 10 MiB form of unknown length", "application/x-www-form-urlencoded",
		io.MultiReader(strings.NewReader("token="), strings.NewReader(strings.Repeat("x", 10<<20))))
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("the dashboard wrote %s to the temporary directory", e.Name())
	}
}

// TestLiveEventsCarryACommitSubjectWithCarriageReturnsAsOneEvent commits
// a subject of carriage returns and event-stream fields, as a tenant may,
// and reads the fleet's live stream as a browser does: one event, the
// subject in it intact, and no field the dashboard did not write.
func TestLiveEventsCarryACommitSubjectWithCarriageReturnsAsOneEvent(t *testing.T) {
	f := newFixture(t)
	subject := "web: deploy\r\r\revent: update\rdata: <b>all is well</b>\rid: 7\r\rdata: the end"
	revision := f.repo.Commit(t, subject, map[string]string{"apps/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-extra\n  namespace: " + f.ns + "\n"})
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), f.key, &s); err != nil {
		t.Fatal(err)
	}
	if err := syncview.RequestSync(context.Background(), c, &s, time.Now()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the agent applies the commit", func() string {
		if err := c.Get(context.Background(), f.key, &s); err != nil {
			return err.Error()
		}
		if s.Status.LastAppliedRevision != revision {
			return "applied " + s.Status.LastAppliedRevision
		}
		return ""
	})
	addr, _ := dashboard(t, kubeconfig(t))
	events := liveStream(t, addr, "/live", nil)
	ev := firstEvent(t, "the fleet's stream", events)
	if ev.Type != "update" || ev.Fields[0] != "event" {
		t.Errorf("the first event is %q with fields %v, want an update", ev.Type, ev.Fields)
	}
	for _, field := range ev.Fields[1:] {
		if field != "data" {
			t.Errorf("the first event has a field %q the dashboard did not write (fields %v)", field, ev.Fields)
		}
	}
	if !strings.Contains(html.UnescapeString(ev.Data), subject) {
		t.Errorf("the first event does not hold the commit subject %q intact:\n%s", subject, ev.Data)
	}
}

// TestInClusterActionsImpersonateTheViewersUIDAndExtras suspends a Sync
// through the dashboard as a ServiceAccount whose UID and credential an
// admission policy checks: the request the dashboard makes as the viewer
// carries both, as the viewer's own would.
func TestInClusterActionsImpersonateTheViewersUIDAndExtras(t *testing.T) {
	f := newFixture(t)
	token := serviceAccountToken(t, f.ns, "operator", readSyncs, readEvents, patchSyncs)
	ctx := context.Background()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := c.Create(ctx, tr); err != nil || !tr.Status.Authenticated {
		t.Fatalf("review the operator's token: %v %+v", err, tr.Status)
	}
	user := tr.Status.User
	var extra string
	for k := range user.Extra {
		extra = k
	}
	if user.UID == "" || extra == "" {
		t.Fatalf("the operator's token has no UID or no extra (%+v): nothing for the policy to check", user)
	}
	name := "ui-uid-" + f.ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"syncs"}}},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("request.userInfo.username != %q || (has(request.userInfo.uid) && request.userInfo.uid == %q && has(request.userInfo.extra) && %q in request.userInfo.extra)",
					user.Username, user.UID, extra),
				Message: "the operator's requests must carry its UID and credential",
			}},
		}}
	deny := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: deny,
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: f.ns}}}}}
	for _, o := range []client.Object{policy, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	// The policy is in force once it refuses the operator's name alone.
	nameOnly := rest.CopyConfig(env.Config)
	nameOnly.Impersonate = rest.ImpersonationConfig{UserName: user.Username, Groups: user.Groups}
	asName, err := client.New(nameOnly, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the policy refuses a request with the operator's name alone", func() string {
		var s v1alpha1.Sync
		if err := asName.Get(ctx, f.key, &s); err != nil {
			return err.Error()
		}
		err := syncview.RequestSync(ctx, asName, &s, time.Now())
		if err == nil || !strings.Contains(err.Error(), "must carry its UID") {
			return fmt.Sprintf("request a sync as the name alone: %v", err)
		}
		return ""
	})

	addr := inClusterServer(t, ui.Auth{}, nil)
	d := &inCluster{t: t, addr: addr}
	d.signIn(token)
	syncPath := "/c/prod-eu/syncs/" + f.ns + "/web"
	_, confirm := d.page(syncPath + "/suspend")
	m := csrfField.FindStringSubmatch(confirm)
	if m == nil {
		t.Fatalf("the confirmation page has no CSRF token:\n%s", confirm)
	}
	resp, body := d.do(http.MethodPost, syncPath+"/suspend", "text/html", url.Values{"confirm": {"yes"}, "csrf": {html.UnescapeString(m[1])}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Suspended") {
		t.Errorf("suspend through the dashboard as the operator: %s, want it done\n%s", resp.Status, body)
	}
}

// TestLocalDashboardAnswersOnlyTheURLItPrinted reads `driftless ui`
// without its token, with a wrong one, with the printed URL (which sets
// the session cookie and drops the token from the address), and by
// another Host name.
func TestLocalDashboardAnswersOnlyTheURLItPrinted(t *testing.T) {
	addr, printed := dashboard(t, kubeconfig(t))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(rawURL, host string, cookie *http.Cookie) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, rawURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/html")
		if host != "" {
			req.Host = host
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/", "/live", "/c/admin/syncs/default/web", "/?token=wrong"} {
		if resp := send(addr+path, "", nil); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s without the printed token: %s, want 401 or 403", path, resp.Status)
		}
	}
	resp := send(printed, "", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("GET the printed URL: %s to %q, want 303 to / (the token dropped from the address)", resp.Status, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.HttpOnly && ck.SameSite == http.SameSiteStrictMode && ck.Path == "/" {
			session = &http.Cookie{Name: ck.Name, Value: ck.Value}
		}
	}
	if session == nil {
		t.Fatalf("the printed URL set no HttpOnly, SameSite=Strict cookie: %q", resp.Header.Values("Set-Cookie"))
	}
	if token := printed[strings.Index(printed, "token=")+len("token="):]; strings.Contains(session.Value, token) {
		t.Errorf("the session cookie holds the printed token itself")
	}
	if resp := send(addr+"/", "", session); resp.StatusCode != http.StatusOK {
		t.Errorf("GET / with the session cookie: %s, want 200", resp.Status)
	}
	port := addr[strings.LastIndex(addr, ":")+1:]
	for _, host := range []string{"localhost:" + port, "[::1]:" + port} {
		if resp := send(addr+"/", host, session); resp.StatusCode != http.StatusOK {
			t.Errorf("GET / for Host %s: %s, want 200", host, resp.Status)
		}
	}
	for _, host := range []string{"rebound.example:" + port, "127.0.0.1.nip.io:" + port, "127.0.0.1:1"} {
		if resp := send(addr+"/", host, session); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("GET / for Host %s: %s, want 421", host, resp.Status)
		}
	}
}
