package receiver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/controller"
)

const (
	agentNS    = "driftless-system"
	secretName = "push-hooks"
)

// recorder keeps the events emitted.
type recorder struct {
	mu     sync.Mutex
	events []string // "type reason regarding: note"
}

func (r *recorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	obj := regarding.(client.Object)
	r.events = append(r.events, fmt.Sprintf("%s %s %T %s/%s: %s", eventtype, reason, regarding, obj.GetNamespace(), obj.GetName(), fmt.Sprintf(note, args...)))
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// fixture is a Receiver over a fake API with the fleet Syncs, its clock
// and what it woke.
type fixture struct {
	t      *testing.T
	r      *Receiver
	api    client.Client
	wake   chan controller.WakeUp
	events *recorder
	now    time.Time
}

func newFixture(t *testing.T, secret map[string]string, change ...func(*Options)) *fixture {
	t.Helper()
	scheme := v1alpha1.NewScheme()
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, s := range fleet() {
		b = b.WithObjects(s.DeepCopy())
	}
	if secret != nil {
		data := map[string][]byte{}
		for k, v := range secret {
			data[k] = []byte(v)
		}
		b = b.WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: secretName}, Data: data})
	}
	f := &fixture{
		t: t, api: b.Build(), wake: make(chan controller.WakeUp, 100), events: &recorder{},
		now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC),
	}
	opts := Options{
		Addr:     "127.0.0.1:0",
		Secret:   types.NamespacedName{Namespace: agentNS, Name: secretName},
		Syncs:    f.api,
		Secrets:  f.api,
		Wake:     f.wake,
		Recorder: f.events,
		Limits:   DefaultLimits(),
		Now:      func() time.Time { return f.now },
	}
	for _, c := range change {
		c(&opts)
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

// request is a webhook request as a provider sends it.
type request struct {
	path    string
	method  string
	remote  string
	headers map[string]string
	body    []byte
}

func (f *fixture) do(req request) (int, Reply) {
	f.t.Helper()
	if req.method == "" {
		req.method = http.MethodPost
	}
	hr := httptest.NewRequest(req.method, req.path, bytes.NewReader(req.body))
	if req.remote != "" {
		hr.RemoteAddr = req.remote
	}
	for k, v := range req.headers {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.r.ServeHTTP(w, hr)
	var reply Reply
	if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
		f.t.Fatalf("%s %s: the reply is not JSON: %v: %q", req.method, req.path, err, w.Body.String())
	}
	return w.Code, reply
}

// woken drains the wake channel: the Syncs handed to the controller.
func (f *fixture) woken() []string {
	out := []string{}
	for {
		select {
		case e := <-f.wake:
			out = append(out, e.Sync.Namespace+"/"+e.Sync.Name)
		default:
			return out
		}
	}
}

func hmacHex(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// signed returns the request provider sends for body, signed with secret.
func signed(provider, secret string, body []byte, delivery string) request {
	h := map[string]string{"Content-Type": "application/json"}
	switch provider {
	case GitHub:
		h["X-GitHub-Event"], h["X-GitHub-Delivery"] = "push", delivery
		h["X-Hub-Signature-256"] = "sha256=" + hmacHex(secret, body)
	case GitLab:
		h["X-Gitlab-Event"], h["X-Gitlab-Event-UUID"] = "Push Hook", delivery
		h["X-Gitlab-Token"] = secret
	case Gitea:
		h["X-Gitea-Event"], h["X-Gitea-Delivery"] = "push", delivery
		h["X-Gitea-Signature"] = hmacHex(secret, body)
	case Bitbucket:
		h["X-Event-Key"], h["X-Request-Id"] = "repo:refs_changed", delivery
		h["X-Hub-Signature"] = "sha256=" + hmacHex(secret, body)
	case Generic:
		h["X-Driftless-Delivery"] = delivery
		h["X-Driftless-Signature"] = "sha256=" + hmacHex(secret, body)
	}
	return request{path: "/hooks/" + provider, headers: h, body: body}
}

// fleetMain are the Syncs of main of git.example.com/platform/fleet at
// default ports; giteaMain adds the one on SSH port 2222 that the Gitea
// payload names.
var (
	fleetMain = []string{"team-a/fleet-https", "team-a/fleet-scp", "team-a/fleet-token", "team-b/fleet-ssh"}
	giteaMain = []string{"team-a/fleet-https", "team-a/fleet-scp", "team-a/fleet-ssh-2222", "team-a/fleet-token", "team-b/fleet-ssh"}
)

func TestASignedPushFromEachProviderWakesTheSyncsOfItsRepositoryAndRef(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		file     string
		headers  map[string]string
		want     []string
	}{
		{"GitHub", GitHub, "github-push.json", nil, fleetMain},
		{"GitLab, push hook", GitLab, "gitlab-push.json", nil, fleetMain},
		{"GitLab, tag push hook", GitLab, "gitlab-tag-push.json", map[string]string{"X-Gitlab-Event": "Tag Push Hook"}, []string{"team-a/fleet-tag"}},
		{"Gitea, whose ssh_url has its port", Gitea, "gitea-push.json", nil, giteaMain},
		{"Forgejo, with its own headers", Gitea, "gitea-push.json", map[string]string{
			"X-Gitea-Event": "", "X-Gitea-Signature": "", "X-Forgejo-Event": "push",
		}, giteaMain},
		{"Bitbucket Server, by its SSH clone link on port 7999", Bitbucket, "bitbucket-refs-changed.json", nil, []string{"team-a/fleet-bitbucket"}},
		{"the generic endpoint", Generic, "generic.json", nil, fleetMain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{tt.provider: "s3cret-" + tt.provider})
			body := readPayload(t, tt.file)
			req := signed(tt.provider, "s3cret-"+tt.provider, body, "delivery-1")
			for k, v := range tt.headers {
				req.headers[k] = v
			}
			if req.headers["X-Forgejo-Event"] != "" {
				req.headers["X-Forgejo-Signature"] = hmacHex("s3cret-"+tt.provider, body)
			}
			code, reply := f.do(req)
			if code != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", code, reply.Message)
			}
			if diff := cmp.Diff(tt.want, reply.Woken); diff != "" {
				t.Errorf("the reply's woken Syncs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, f.woken()); diff != "" {
				t.Errorf("Syncs handed to the controller (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPushNoSyncFollowsWakesNothingAndSaysSo(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"})
	body := bytes.ReplaceAll(readPayload(t, "github-push.json"), []byte("refs/heads/main"), []byte("refs/heads/feature"))
	code, reply := f.do(signed(GitHub, "s3cret", body, "d1"))
	if code != http.StatusOK || len(reply.Woken) != 0 || !strings.Contains(reply.Message, "refs/heads/feature") {
		t.Errorf("got %d %+v, want 200 saying no Sync follows refs/heads/feature", code, reply)
	}
	if got := f.woken(); len(got) != 0 {
		t.Errorf("woke %v", got)
	}
}

func TestARequestNotSignedWithTheSecretIsRefusedWithAnEventAndWakesNothing(t *testing.T) {
	body := readPayload(t, "github-push.json")
	tests := []struct {
		name     string
		provider string
		change   func(h map[string]string)
		wantWhy  string
	}{
		{"GitHub without a signature", GitHub, func(h map[string]string) { delete(h, "X-Hub-Signature-256") }, "no X-Hub-Signature-256 header"},
		{"GitHub signed with another secret", GitHub, func(h map[string]string) {
			h["X-Hub-Signature-256"] = "sha256=" + hmacHex("guess", body)
		}, "does not match"},
		{"GitHub signed over another body", GitHub, func(h map[string]string) {
			h["X-Hub-Signature-256"] = "sha256=" + hmacHex("s3cret", []byte("{}"))
		}, "does not match"},
		{"GitHub with the old SHA-1 form", GitHub, func(h map[string]string) { h["X-Hub-Signature-256"] = "sha1=" + hmacHex("s3cret", body) }, `does not start with "sha256="`},
		{"GitHub with a signature that is not hex", GitHub, func(h map[string]string) { h["X-Hub-Signature-256"] = "sha256=zz" }, "not hexadecimal"},
		{"GitLab with another token", GitLab, func(h map[string]string) { h["X-Gitlab-Token"] = "s3cre" }, "does not equal"},
		{"GitLab without a token", GitLab, func(h map[string]string) { delete(h, "X-Gitlab-Token") }, "no X-Gitlab-Token header"},
		{"Gitea with a truncated signature", Gitea, func(h map[string]string) { h["X-Gitea-Signature"] = h["X-Gitea-Signature"][:10] }, "does not match"},
		{"Bitbucket signed with another secret", Bitbucket, func(h map[string]string) {
			h["X-Hub-Signature"] = "sha256=" + hmacHex("guess", body)
		}, "does not match"},
		{"generic without a signature", Generic, func(h map[string]string) { delete(h, "X-Driftless-Signature") }, "no X-Driftless-Signature header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{SharedSecretKey: "s3cret"})
			req := signed(tt.provider, "s3cret", body, "d1")
			tt.change(req.headers)
			code, reply := f.do(req)
			if code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401: %s", code, reply.Message)
			}
			if got := f.woken(); len(got) != 0 {
				t.Errorf("woke %v", got)
			}
			events := f.events.list()
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning WebhookRejected *v1.Secret driftless-system/push-hooks: ") ||
				!strings.Contains(events[0], tt.wantWhy) || !strings.Contains(events[0], "/hooks/"+tt.provider) {
				t.Errorf("events = %q, want one Warning on the webhook Secret saying %q", events, tt.wantWhy)
			}
			for _, e := range events {
				if strings.Contains(e, "s3cret") || strings.Contains(e, hmacHex("s3cret", body)) {
					t.Errorf("an event shows the secret or a signature: %q", e)
				}
			}
			// A refused delivery ID is not remembered: the same delivery,
			// signed, still wakes.
			code, _ = f.do(signed(tt.provider, "s3cret", readPayload(t, map[string]string{
				GitHub: "github-push.json", GitLab: "gitlab-push.json", Gitea: "gitea-push.json",
				Bitbucket: "bitbucket-refs-changed.json", Generic: "generic.json",
			}[tt.provider]), "d1"))
			if code != http.StatusOK || len(f.woken()) == 0 {
				t.Errorf("the same delivery signed: status %d and nothing woken; want 200 and Syncs woken", code)
			}
		})
	}
}

func TestWarningEventsAboutRefusedRequestsAreThrottledAndCounted(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"})
	bad := signed(GitHub, "guess", readPayload(t, "github-push.json"), "")
	for range 5 {
		if code, _ := f.do(bad); code != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", code)
		}
	}
	if got := len(f.events.list()); got != 1 {
		t.Fatalf("%d events for 5 refusals within a minute, want 1", got)
	}
	f.now = f.now.Add(time.Minute)
	f.do(bad)
	events := f.events.list()
	if len(events) != 2 || !strings.Contains(events[1], "and 4 more refused since the last event") {
		t.Errorf("events = %q, want a second one counting the 4 held back", events)
	}
}

func TestTheSharedTokenKeyServesEveryProviderWithoutItsOwnKey(t *testing.T) {
	f := newFixture(t, map[string]string{SharedSecretKey: "shared", GitHub: "github-only"})
	if code, reply := f.do(signed(Generic, "shared", readPayload(t, "generic.json"), "")); code != http.StatusOK {
		t.Errorf("generic signed with the token key: status %d (%s), want 200", code, reply.Message)
	}
	if code, _ := f.do(signed(GitHub, "shared", readPayload(t, "github-push.json"), "")); code != http.StatusUnauthorized {
		t.Errorf("GitHub signed with the token key while the github key is set: status %d, want 401", code)
	}
	if code, _ := f.do(signed(GitHub, "github-only", readPayload(t, "github-push.json"), "")); code != http.StatusOK {
		t.Errorf("GitHub signed with the github key: status %d, want 200", code)
	}
}

func TestWithoutASecretForTheProviderNoRequestIsAcceptedAndTheEventSaysWhatToSet(t *testing.T) {
	tests := []struct {
		name   string
		secret map[string]string
		want   string
	}{
		{"no Secret", nil, "the webhook Secret driftless-system/push-hooks does not exist"},
		{"no key for the provider", map[string]string{GitLab: "s3cret"}, "has neither the key github nor token"},
		{"an empty key", map[string]string{GitHub: ""}, "has neither the key github nor token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.secret)
			code, reply := f.do(signed(GitHub, "", readPayload(t, "github-push.json"), ""))
			if code != http.StatusServiceUnavailable || strings.Contains(reply.Message, secretName) {
				t.Errorf("got %d %q, want 503 without the Secret's name", code, reply.Message)
			}
			if got := f.woken(); len(got) != 0 {
				t.Errorf("woke %v", got)
			}
			if events := f.events.list(); len(events) != 1 || !strings.Contains(events[0], tt.want) {
				t.Errorf("events = %q, want one saying %q", events, tt.want)
			}
		})
	}
}

func TestARotatedSecretIsUsedOnceTheCacheExpires(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "old"})
	body := readPayload(t, "github-push.json")
	if code, _ := f.do(signed(GitHub, "old", body, "")); code != http.StatusOK {
		t.Fatalf("signed with the old secret: status %d, want 200", code)
	}
	var s corev1.Secret
	key := client.ObjectKey{Namespace: agentNS, Name: secretName}
	if err := f.api.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	s.Data[GitHub] = []byte("new")
	if err := f.api.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(DefaultLimits().SecretTTL)
	if code, _ := f.do(signed(GitHub, "new", body, "")); code != http.StatusOK {
		t.Errorf("signed with the new secret after the TTL: status %d, want 200", code)
	}
	if code, _ := f.do(signed(GitHub, "old", body, "")); code != http.StatusUnauthorized {
		t.Errorf("signed with the old secret after the TTL: status %d, want 401", code)
	}
}

func TestABodyOverTheLimitIsRefusedWith413(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"})
	big := append([]byte(`{"ref":"refs/heads/main","padding":"`), bytes.Repeat([]byte("x"), 1<<20)...)
	big = append(big, `"}`...)
	req := signed(GitHub, "s3cret", big, "")
	if code, reply := f.do(req); code != http.StatusRequestEntityTooLarge {
		t.Errorf("with Content-Length: status %d (%s), want 413", code, reply.Message)
	}
	// Without Content-Length (chunked), the limit holds while reading.
	hr := httptest.NewRequest(http.MethodPost, req.path, io.MultiReader(bytes.NewReader(big)))
	hr.ContentLength = -1
	for k, v := range req.headers {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.r.ServeHTTP(w, hr)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: status %d, want 413", w.Code)
	}
	if got := f.woken(); len(got) != 0 {
		t.Errorf("woke %v", got)
	}
}

func TestAFloodIsRefusedWith429PerAddressAndInAll(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"})
	limits := DefaultLimits()
	bad := signed(GitHub, "guess", []byte("{}"), "")
	bad.remote = "192.0.2.1:5000"
	refused, unauthenticated := 0, 0
	for range limits.PerAddressBurst + 10 {
		switch code, _ := f.do(bad); code {
		case http.StatusTooManyRequests:
			refused++
		case http.StatusUnauthorized:
			unauthenticated++
		}
	}
	if unauthenticated != limits.RefusedPerAddressBurst || refused != limits.PerAddressBurst+10-limits.RefusedPerAddressBurst {
		t.Errorf("%d of %d bad requests from one address got 401 and %d got 429, want %d with 401 and the rest 429",
			unauthenticated, limits.PerAddressBurst+10, refused, limits.RefusedPerAddressBurst)
	}
	// The flood spent its own budget, not the deliveries': a signed push
	// from the same address wakes, as does one from another address.
	for _, remote := range []string{"192.0.2.1:5000", "192.0.2.2:5000"} {
		good := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "")
		good.remote = remote
		if code, reply := f.do(good); code != http.StatusOK || len(reply.Woken) == 0 {
			t.Errorf("a push from %s after the flood: %d %+v, want 200 with Syncs woken", remote, code, reply)
		}
	}
	// A second's worth of tokens later, the first address is served again.
	f.now = f.now.Add(time.Second)
	if code, _ := f.do(bad); code != http.StatusUnauthorized {
		t.Errorf("a second later: status %d, want 401 (served, refused for its signature)", code)
	}

	// Authenticated deliveries have their own limit per address, checked
	// before the body is read.
	f = newFixture(t, map[string]string{GitHub: "s3cret"})
	good := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "")
	good.remote = "192.0.2.3:5000"
	refused = 0
	for range limits.PerAddressBurst + 3 {
		if code, _ := f.do(good); code == http.StatusTooManyRequests {
			refused++
		}
		f.woken()
	}
	if refused != 3 {
		t.Errorf("%d of %d pushes from one address refused with 429, want 3", refused, limits.PerAddressBurst+3)
	}

	// Many addresses together hit the global delivery limit.
	f = newFixture(t, map[string]string{GitHub: "s3cret"})
	refused = 0
	for i := range limits.GlobalBurst + 10 {
		good.remote = fmt.Sprintf("198.51.100.%d:5000", i%250)
		if code, _ := f.do(good); code == http.StatusTooManyRequests {
			refused++
		}
		f.woken()
	}
	if refused != 10 {
		t.Errorf("%d of %d pushes from many addresses refused with 429, want 10", refused, limits.GlobalBurst+10)
	}
}

func TestAFloodOfBadSignaturesDoesNotStarveSignedPushes(t *testing.T) {
	limits := DefaultLimits()
	tests := []struct {
		name    string
		flooder func(i int) string
	}{
		{name: "one address floods", flooder: func(int) string { return "192.0.2.1:5000" }},
		{name: "many addresses flood", flooder: func(i int) string { return fmt.Sprintf("198.51.%d.%d:5000", i/250, i%250) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{GitHub: "s3cret"})
			bad := signed(GitHub, "guess", []byte("{}"), "")
			// Ten seconds at twice the global rate: 100 bad requests a
			// second, a push from another address and from the first
			// flooding one each second.
			unauthenticated := 0
			for sec := range 10 {
				for i := range 2 * int(limits.Global) {
					bad.remote = tt.flooder(sec*2*int(limits.Global) + i)
					if code, _ := f.do(bad); code == http.StatusUnauthorized {
						unauthenticated++
					}
				}
				for _, remote := range []string{"140.82.112.1:443", tt.flooder(0)} {
					good := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "")
					good.remote = remote
					if code, reply := f.do(good); code != http.StatusOK || len(reply.Woken) == 0 {
						t.Fatalf("second %d: a push from %s during the flood: %d %+v, want 200 with Syncs woken", sec, remote, code, reply)
					}
					f.woken()
				}
				f.now = f.now.Add(time.Second)
			}
			// The bad requests answered 401 (each logged) are bounded too.
			if most := limits.GlobalRefusedBurst + 10*int(limits.GlobalRefused); unauthenticated > most {
				t.Errorf("%d bad requests answered 401 in 10 s, want at most %d", unauthenticated, most)
			}
		})
	}
}

func TestAReplayedDeliveryIsIgnoredWithinTheWindow(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"})
	req := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if code, reply := f.do(req); code != http.StatusOK || len(reply.Woken) != len(fleetMain) {
		t.Fatalf("first delivery: %d %+v", code, reply)
	}
	f.woken()
	f.now = f.now.Add(time.Minute)
	code, reply := f.do(req)
	if code != http.StatusOK || len(reply.Woken) != 0 || !strings.Contains(reply.Message, "already received 1m0s ago; ignored") {
		t.Errorf("replay: %d %+v, want 200 saying it was ignored", code, reply)
	}
	if got := f.woken(); len(got) != 0 {
		t.Errorf("the replay woke %v", got)
	}
	// Another provider's delivery with the same ID is not a replay.
	other := signed(Generic, "s3cret", readPayload(t, "generic.json"), "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	f2 := newFixture(t, map[string]string{SharedSecretKey: "s3cret"})
	f2.do(req)
	if code, reply := f2.do(other); code != http.StatusOK || len(reply.Woken) == 0 {
		t.Errorf("the same ID from another provider: %d %+v, want Syncs woken", code, reply)
	}
	// After the window the ID is forgotten.
	f.now = f.now.Add(DefaultLimits().ReplayWindow)
	if code, reply := f.do(req); code != http.StatusOK || len(reply.Woken) == 0 {
		t.Errorf("after the window: %d %+v, want Syncs woken", code, reply)
	}
}

func TestPingsAndOtherEventsAreAnsweredWithoutWaking(t *testing.T) {
	tests := []struct {
		name     string
		provider string
		headers  map[string]string
		want     string
	}{
		{"a GitHub ping", GitHub, map[string]string{"X-GitHub-Event": "ping"}, "pong"},
		{"a Bitbucket test connection", Bitbucket, map[string]string{"X-Event-Key": "diagnostics:ping"}, "pong"},
		{"a GitHub pull request", GitHub, map[string]string{"X-GitHub-Event": "pull_request"}, `event "pull_request" ignored: only push events wake Syncs`},
		{"a GitLab merge request", GitLab, map[string]string{"X-Gitlab-Event": "Merge Request Hook"}, "only Push Hook, Tag Push Hook events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{SharedSecretKey: "s3cret"})
			req := signed(tt.provider, "s3cret", []byte(`{"zen":"Keep it logically awesome."}`), "")
			for k, v := range tt.headers {
				req.headers[k] = v
			}
			code, reply := f.do(req)
			if code != http.StatusOK || !strings.Contains(reply.Message, tt.want) || len(reply.Woken) != 0 {
				t.Errorf("got %d %+v, want 200 saying %q", code, reply, tt.want)
			}
			if got := f.woken(); len(got) != 0 {
				t.Errorf("woke %v", got)
			}
		})
	}
}

func TestABadPayloadIs400AndCanBeSentAgainFixed(t *testing.T) {
	f := newFixture(t, map[string]string{Generic: "s3cret"})
	code, reply := f.do(signed(Generic, "s3cret", []byte(`{"repository":"https://git.example.com/platform/fleet.git","ref":"main"}`), "d1"))
	if code != http.StatusBadRequest || !strings.Contains(reply.Message, "refs/heads/<branch>") {
		t.Errorf("got %d %q, want 400 saying how to write the ref", code, reply.Message)
	}
	if code, reply := f.do(signed(Generic, "s3cret", readPayload(t, "generic.json"), "d1")); code != http.StatusOK || len(reply.Woken) == 0 {
		t.Errorf("the same delivery fixed: %d %+v, want Syncs woken", code, reply)
	}
}

func TestOnlyPOSTToAKnownEndpointIsServed(t *testing.T) {
	f := newFixture(t, map[string]string{SharedSecretKey: "s3cret"})
	if code, reply := f.do(request{path: "/hooks/gitee", body: []byte("{}")}); code != http.StatusNotFound || !strings.Contains(reply.Message, "/hooks/github") {
		t.Errorf("unknown endpoint: %d %q, want 404 listing the endpoints", code, reply.Message)
	}
	if code, _ := f.do(request{path: "/hooks/github", method: http.MethodGet}); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", code)
	}
}

func TestAReplicaThatDoesNotLeadAnswers503(t *testing.T) {
	elected := make(chan struct{})
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) { o.Elected = elected })
	req := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "d1")
	if code, _ := f.do(req); code != http.StatusServiceUnavailable {
		t.Errorf("before the election: status %d, want 503", code)
	}
	close(elected)
	if code, reply := f.do(req); code != http.StatusOK || len(reply.Woken) == 0 {
		t.Errorf("once elected, the same delivery: %d %+v, want Syncs woken", code, reply)
	}
}

func TestAWakeThatTheControllerDoesNotTakeIs503AndTheDeliveryCanBeRetried(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) {
		o.Wake = make(chan controller.WakeUp) // nobody reads it
		o.Limits.WakeTimeout = 10 * time.Millisecond
	})
	req := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "d1")
	if code, _ := f.do(req); code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", code)
	}
	if code, reply := f.do(req); code != http.StatusServiceUnavailable || strings.Contains(reply.Message, "already received") {
		t.Errorf("retry: %d %q, want 503 again, not taken for a replay", code, reply.Message)
	}
}

func TestStartServesUntilTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) { o.Addr = addr })

	// The address is taken: Start says which.
	if err := f.r.Start(context.Background()); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Start on a taken address = %v, want an error naming %s", err, addr)
	}
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.r.Start(ctx) }()
	req := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "d1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		hr, _ := http.NewRequest(http.MethodPost, "http://"+addr+req.path, bytes.NewReader(req.body))
		for k, v := range req.headers {
			hr.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(hr)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d over TCP, want 200", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver did not answer on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v after the context ended, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Start did not return after the context ended")
	}
}

func TestOptionsWithoutLimitsGetTheDefaults(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) { o.Limits = Limits{} })
	if code, reply := f.do(signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "d1")); code != http.StatusOK || len(reply.Woken) == 0 {
		t.Errorf("a push with zero Limits: %d %+v, want Syncs woken", code, reply)
	}
	big := signed(GitHub, "s3cret", bytes.Repeat([]byte(" "), int(DefaultLimits().MaxBodyBytes)+1), "d2")
	if code, _ := f.do(big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the default limit with zero Limits: status %d, want 413", code)
	}
}
