package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driftless/driftless/api/v1alpha1"
)

const sha = "3f2a9c1e0d4b5a6978877665544332211000ffee"

// statusTarget returns a config with one commit status target of typ
// at address, its token in a file.
func statusTarget(t *testing.T, typ, address string) Config {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-3f9a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Config{Cluster: "prod-eu", Targets: []Target{{Name: "statuses", Type: typ, Address: address, TokenFile: tok,
		TargetURL: "https://dash.example.com/{cluster}/{namespace}/{name}?rev={revision}"}}}
}

func syncAt(url string) *v1alpha1.Sync {
	s := syncObj()
	s.Spec.Source.Git.URL = url
	return s
}

func TestEachProviderGetsItsCommitStatus(t *testing.T) {
	tests := []struct {
		name     string
		typ      string
		gitURL   string // %s is the endpoint's host:port
		apiPath  string // under the endpoint
		wantPath string
		header   [2]string
		wantBody map[string]any
	}{
		{
			name: "GitHub gets a Bearer token and owner/repo from an scp-like URL", typ: TypeGitHubStatus,
			gitURL: "git@127.0.0.1:Org/Fleet.git", wantPath: "/repos/Org/Fleet/statuses/" + sha,
			header: [2]string{"Authorization", "Bearer tok-3f9a"},
			wantBody: map[string]any{"state": "failure", "context": "driftless/prod-eu/team-a/shop",
				"description": "BuildFailed: apps/web.yaml: yaml: line 3: did not find expected key",
				"target_url":  "https://dash.example.com/prod-eu/team-a/shop?rev=" + sha},
		},
		{
			name: "GitLab gets a PRIVATE-TOKEN and the project path, escaped, from a nested group", typ: TypeGitLabStatus,
			gitURL: "https://%s/group/sub/app.git", apiPath: "/api/v4", wantPath: "/api/v4/projects/group%2Fsub%2Fapp/statuses/" + sha,
			header: [2]string{"PRIVATE-TOKEN", "tok-3f9a"},
			wantBody: map[string]any{"state": "failed", "name": "driftless/prod-eu/team-a/shop",
				"description": "BuildFailed: apps/web.yaml: yaml: line 3: did not find expected key",
				"target_url":  "https://dash.example.com/prod-eu/team-a/shop?rev=" + sha},
		},
		{
			name: "Gitea gets a token header and owner/repo from an ssh:// URL on another port", typ: TypeGiteaStatus,
			gitURL: "ssh://git@127.0.0.1:2222/ops/fleet", apiPath: "/api/v1", wantPath: "/api/v1/repos/ops/fleet/statuses/" + sha,
			header: [2]string{"Authorization", "token tok-3f9a"},
			wantBody: map[string]any{"state": "failure", "context": "driftless/prod-eu/team-a/shop",
				"description": "BuildFailed: apps/web.yaml: yaml: line 3: did not find expected key",
				"target_url":  "https://dash.example.com/prod-eu/team-a/shop?rev=" + sha},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndpoint(t)
			gitURL := strings.Replace(tt.gitURL, "%s", strings.TrimPrefix(e.URL, "http://"), 1)
			_, d := start(t, statusTarget(t, tt.typ, e.URL+tt.apiPath), Options{})
			d.Synced(syncAt(gitURL), sha, v1alpha1.ReasonBuildFailed, "apps/web.yaml: yaml: line 3: did not find expected key", false)
			got := e.waitFor(t, 1)[0]
			if got.method != "POST" || got.path != tt.wantPath {
				t.Errorf("request %s %s, want POST %s", got.method, got.path, tt.wantPath)
			}
			if v := got.header.Get(tt.header[0]); v != tt.header[1] {
				t.Errorf("header %s is %q, want %q", tt.header[0], v, tt.header[1])
			}
			var body map[string]any
			if err := json.Unmarshal(got.body, &body); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantBody, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestACommitStatusIsSentOncePerRevisionAndState(t *testing.T) {
	e := newEndpoint(t)
	_, d := start(t, statusTarget(t, TypeGitHubStatus, e.URL), Options{})
	s := syncAt("https://127.0.0.1/org/fleet")
	d.Syncing(s, sha)
	d.Synced(s, sha, v1alpha1.ReasonApplyFailed, "ConfigMap/a/b apply failed", false)
	for range 5 { // retries of the failing revision
		d.Syncing(s, sha)
		d.Synced(s, sha, v1alpha1.ReasonApplyFailed, "ConfigMap/a/b apply failed", false)
	}
	d.Syncing(s, sha)
	d.Synced(s, sha, "", "", false) // it healed at the same revision
	d.Synced(s, sha, "", "", false)
	next := strings.Repeat("b", 40)
	d.Syncing(s, next)
	d.Synced(s, next, "", "", true) // superseded
	// The sender posts in order: once the last status is in, any
	// duplicate would be too.
	var got []request
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got = e.got()
		if len(got) > 0 && strings.Contains(string(got[len(got)-1].body), `"state":"error"`) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var states []string
	for _, r := range got {
		var b StatusBody
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		states = append(states, b.State+"@"+r.path[len(r.path)-4:])
	}
	want := []string{"pending@" + sha[36:], "failure@" + sha[36:], "success@" + sha[36:], "pending@bbbb", "error@bbbb"}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestACommitStatusSurvivesAFailingAPIAndNeverCarriesTheToken(t *testing.T) {
	e := newEndpoint(t, 502, 503)
	_, d := start(t, statusTarget(t, TypeGiteaStatus, e.URL), Options{})
	d.Synced(syncAt("https://127.0.0.1/org/fleet"), sha, "", "", false)
	got := e.waitFor(t, 3)
	if !strings.Contains(string(got[2].body), `"state":"success"`) {
		t.Errorf("third attempt %s, want the success status again", got[2].body)
	}
	if strings.Contains(string(got[2].body), "tok-3f9a") {
		t.Errorf("the token is in the body: %s", got[2].body)
	}
}

func TestACommitStatusGoesOnlyToTheServerOfTheRepository(t *testing.T) {
	e := newEndpoint(t)
	_, d := start(t, statusTarget(t, TypeGitHubStatus, e.URL), Options{})
	d.Synced(syncAt("https://gitlab.example.com/org/fleet"), sha, "", "", false)
	other := syncAt("https://gitlab.example.com/org/fleet")
	other.Name = "mirrored"
	other.Annotations = map[string]string{v1alpha1.CommitStatusRepositoryAnnotation: "org/upstream"}
	d.Synced(other, sha, "", "", false)
	// Notices are handled in order: had the first been sent, it would
	// have arrived first.
	got := e.waitFor(t, 1)
	if got[0].path != "/repos/org/upstream/statuses/"+sha {
		t.Errorf("first status posted to %s, want the annotated repository org/upstream: the other Sync's repository is on another server", got[0].path)
	}
}

func TestAStatusDescriptionFitsGitHubsLimit(t *testing.T) {
	n := statusNotice{sync: types.NamespacedName{Namespace: "a", Name: "b"}, revision: sha, state: StateFailure,
		reason: v1alpha1.ReasonBuildFailed, message: strings.Repeat("é", 300)}
	d := n.description("c")
	if r := []rune(d); len(r) != MaxDescription || !strings.HasPrefix(d, "BuildFailed: ") || !strings.HasSuffix(d, "…") {
		t.Errorf("description of %d characters %q, want %d starting with the reason and cut with …", len(r), d, MaxDescription)
	}
}

func TestStatusTargetsAreCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		target Target
		want   string
	}{
		{"a gitea target needs an address", Target{Type: TypeGiteaStatus, TokenFile: "tok"}, "address is required"},
		{"a status target needs a token", Target{Type: TypeGitHubStatus}, "tokenFile is required"},
		{"a status target takes no url", Target{Type: TypeGitLabStatus, TokenFile: "tok", URL: "https://x"}, "not url"},
		{"a status target takes no events", Target{Type: TypeGitHubStatus, TokenFile: "tok", Events: []Event{Failed}}, "takes no events"},
		{"a chat target takes no token", Target{Type: TypeSlack, URL: "https://x", TokenFile: "tok"}, "commit status targets only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Targets: []Target{tt.target}}
			err := c.complete(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	c := Config{Targets: []Target{{Type: TypeGitHubStatus, TokenFile: "tok"}}}
	if err := c.complete(dir); err != nil || c.Targets[0].Address != "https://api.github.com" || c.Cluster != DefaultCluster {
		t.Errorf("a GitHub target without address: %v, address %q, cluster %q; want api.github.com and the default cluster", err, c.Targets[0].Address, c.Cluster)
	}
}

func TestACommitStatusTokenNeverFollowsARedirect(t *testing.T) {
	tests := []struct {
		name   string
		typ    string
		header string
	}{
		{name: "GitHub's Bearer token stays home, though the redirect is to the same host", typ: TypeGitHubStatus, header: "Authorization"},
		{name: "GitLab's PRIVATE-TOKEN stays home", typ: TypeGitLabStatus, header: "PRIVATE-TOKEN"},
		{name: "Gitea's token header stays home", typ: TypeGiteaStatus, header: "Authorization"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			away := newEndpoint(t)
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, away.URL+r.URL.Path, http.StatusTemporaryRedirect)
			}))
			t.Cleanup(redirector.Close)
			cfg := statusTarget(t, tt.typ, redirector.URL)
			if err := cfg.complete(t.TempDir()); err != nil {
				t.Fatal(err)
			}
			target := &cfg.Targets[0]
			dl, err := target.statusDelivery(statusNoticeOf(syncAt("https://127.0.0.1/org/fleet"), sha, StateSuccess, "", ""), cfg.Cluster)
			if err != nil {
				t.Fatal(err)
			}
			opts := DefaultOptions()
			opts.Backoff = time.Millisecond
			err = (&sender{target: target, opts: opts}).deliver(context.Background(), dl)
			if err == nil || !strings.Contains(err.Error(), "target statuses") || !strings.Contains(err.Error(), "redirect") {
				t.Errorf("delivery error %v, want a redirect refused, naming the target", err)
			}
			if err != nil && strings.Contains(err.Error(), "tok-3f9a") {
				t.Errorf("the delivery error holds the token: %v", err)
			}
			for _, r := range away.got() {
				if v := r.header.Get(tt.header); strings.Contains(v, "tok-3f9a") {
					t.Errorf("the redirect's target received the token in %s", tt.header)
				}
			}
			if n := len(away.got()); n != 0 {
				t.Errorf("the redirect was followed: the other server received %d requests", n)
			}
		})
	}
}

// TestTheWaitingCommitOfAHeldSyncSaysHeldOnce: the tip of a held Sync's
// branch is pending with the hold as its description, once however often
// the agent reports it, then gets its outcome when released.
func TestTheWaitingCommitOfAHeldSyncSaysHeldOnce(t *testing.T) {
	e := newEndpoint(t)
	_, d := start(t, statusTarget(t, TypeGitLabStatus, e.URL+"/api/v4"), Options{})
	s := syncAt("https://127.0.0.1/org/fleet")
	const held = "held at 9b1d3e7 by jane: payment errors; 1 commit pending (tip 3f2a9c1)"
	for range 3 {
		d.Held(s, sha, held)
	}
	d.Syncing(s, sha) // released: the tip is synced
	d.Synced(s, sha, "", "applied 3f2a9c1: 1 configured", false)
	var got []request
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got = e.got(); len(got) > 0 && strings.Contains(string(got[len(got)-1].body), `"state":"success"`) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var states []string
	for _, r := range got {
		var b struct{ State, Description string }
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		states = append(states, b.State+": "+b.Description)
	}
	want := []string{"pending: " + held, "success: Ready: applied 3f2a9c1: 1 configured"}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}
