package update

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/update/forgetest"
)

const prToken = "glpat-3f9a77c1e0d4b5a6"

var prChanges = []v1alpha1.ImageChange{
	{File: "apps/app.yaml", Line: 12, Image: "registry.example.com/team/app", Old: "registry.example.com/team/app:1.0.0",
		New: "registry.example.com/team/app:1.1.0", Policy: "team/app"},
	{File: "apps/kustomization.yaml", Line: 4, Image: "registry.example.com/team/web", Old: "2.0.0", New: "2.1.0", Policy: "team/web"},
}

// want is one request the provider must receive.
type want struct {
	method, path, query string
	body                map[string]any
}

// Each provider gets, for open → newer tag → base has the changes, the
// requests its API documents: the exact paths, query, methods, token
// header and JSON fields; one request is opened, then updated, then
// closed.
func TestEachProviderGetsItsPullRequestRequests(t *testing.T) {
	opened := Outcome{Revision: strings.Repeat("a", 40), Commit: strings.Repeat("b", 40), Pushed: true}
	opened.Changes = prChanges[:1]
	newer := Outcome{Revision: strings.Repeat("a", 40), Commit: strings.Repeat("c", 40), Pushed: true}
	newer.Changes = prChanges
	title1, title2 := "Update images: registry.example.com/team/app:1.1.0", "Update images: registry.example.com/team/app:1.1.0, registry.example.com/team/web:2.1.0"
	body1, body2 := Body("team/fleet", "main", opened), Body("team/fleet", "main", newer)
	tests := []struct {
		provider, repo string
		header         [2]string
		noHeader       string
		labels         []string
		want           []want
	}{
		{
			provider: "github", repo: "Org/fleet", header: [2]string{"Authorization", "Bearer " + prToken}, noHeader: "PRIVATE-TOKEN",
			want: []want{
				{"GET", "/repos/Org/fleet/pulls", "head=Org%3Aimage-updates&state=open", nil},
				{"POST", "/repos/Org/fleet/pulls", "", map[string]any{"head": "image-updates", "base": "main", "title": title1, "body": body1}},
				{"POST", "/repos/Org/fleet/issues/1/labels", "", map[string]any{"labels": []any{"images", "robot"}}},
				{"GET", "/repos/Org/fleet/pulls", "head=Org%3Aimage-updates&state=open", nil},
				{"PATCH", "/repos/Org/fleet/pulls/1", "", map[string]any{"title": title2, "body": body2}},
				{"GET", "/repos/Org/fleet/pulls", "head=Org%3Aimage-updates&state=open", nil},
				{"PATCH", "/repos/Org/fleet/pulls/1", "", map[string]any{"state": "closed"}},
			},
		},
		{
			provider: "gitlab", repo: "group/sub/fleet", header: [2]string{"PRIVATE-TOKEN", prToken}, noHeader: "Authorization",
			want: []want{
				{"GET", "/api/v4/projects/group%2Fsub%2Ffleet/merge_requests", "source_branch=image-updates&state=opened", nil},
				{"POST", "/api/v4/projects/group%2Fsub%2Ffleet/merge_requests", "", map[string]any{"source_branch": "image-updates",
					"target_branch": "main", "title": title1, "description": body1, "labels": "images,robot"}},
				{"GET", "/api/v4/projects/group%2Fsub%2Ffleet/merge_requests", "source_branch=image-updates&state=opened", nil},
				{"PUT", "/api/v4/projects/group%2Fsub%2Ffleet/merge_requests/1", "", map[string]any{"title": title2, "description": body2}},
				{"GET", "/api/v4/projects/group%2Fsub%2Ffleet/merge_requests", "source_branch=image-updates&state=opened", nil},
				{"PUT", "/api/v4/projects/group%2Fsub%2Ffleet/merge_requests/1", "", map[string]any{"state_event": "close"}},
			},
		},
		{
			provider: "gitea", repo: "ops/fleet", header: [2]string{"Authorization", "token " + prToken}, noHeader: "PRIVATE-TOKEN",
			labels: []string{"bug", "robot", "images"},
			want: []want{
				{"GET", "/api/v1/repos/ops/fleet/pulls", "limit=50&page=1&state=open", nil},
				{"GET", "/api/v1/repos/ops/fleet/labels", "limit=50&page=1", nil},
				{"POST", "/api/v1/repos/ops/fleet/pulls", "", map[string]any{"head": "image-updates", "base": "main", "title": title1,
					"body": body1, "labels": []any{3.0, 2.0}}},
				{"GET", "/api/v1/repos/ops/fleet/pulls", "limit=50&page=1&state=open", nil},
				{"PATCH", "/api/v1/repos/ops/fleet/pulls/1", "", map[string]any{"title": title2, "body": body2}},
				{"GET", "/api/v1/repos/ops/fleet/pulls", "limit=50&page=1&state=open", nil},
				{"PATCH", "/api/v1/repos/ops/fleet/pulls/1", "", map[string]any{"state": "closed"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			srv := forgetest.New(t, tt.provider, tt.repo)
			srv.Labels = tt.labels
			f := &Forge{Provider: v1alpha1.PullRequestProvider(tt.provider), Address: srv.Address(), Repo: tt.repo, Token: prToken}
			p := Proposal{Forge: f, Sync: "team/fleet", Head: "image-updates", Base: "main", Labels: []string{"images", "robot"}, Update: opened}
			ctx := context.Background()
			got, err := Propose(ctx, p)
			if err != nil || got.Action != ActionOpen || got.PullRequest.Number != 1 || got.PullRequest.State != v1alpha1.PullRequestOpen {
				t.Fatalf("first update: %+v, %v; want #1 opened", got, err)
			}
			p.Last, p.Update = got.PullRequest, newer
			if got, err = Propose(ctx, p); err != nil || got.Action != ActionEdit || got.PullRequest.Number != 1 || got.PullRequest.Commit != newer.Commit {
				t.Fatalf("newer tag: %+v, %v; want #1 updated at %s", got, err, newer.Commit)
			}
			p.Last, p.Update = got.PullRequest, Outcome{Revision: strings.Repeat("d", 40)}
			if got, err = Propose(ctx, p); err != nil || got.Action != ActionClose || got.PullRequest.State != v1alpha1.PullRequestClosed {
				t.Fatalf("base has the changes: %+v, %v; want #1 closed", got, err)
			}
			reqs := srv.Requests()
			if len(reqs) != len(tt.want) {
				for _, r := range reqs {
					t.Logf("%s %s?%s", r.Method, r.Path, r.RawQuery)
				}
				t.Fatalf("%d requests, want %d", len(reqs), len(tt.want))
			}
			for i, w := range tt.want {
				r := reqs[i]
				if r.Method != w.method || r.Path != w.path || r.RawQuery != w.query {
					t.Errorf("request %d: %s %s?%s, want %s %s?%s", i, r.Method, r.Path, r.RawQuery, w.method, w.path, w.query)
				}
				if v := r.Header.Get(tt.header[0]); v != tt.header[1] {
					t.Errorf("request %d: header %s is %q, want %q", i, tt.header[0], v, tt.header[1])
				}
				if v := r.Header.Get(tt.noHeader); v != "" {
					t.Errorf("request %d: header %s is set (%q): the token goes in one header", i, tt.noHeader, v)
				}
				if tt.provider == "github" && (r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28") {
					t.Errorf("request %d: GitHub headers Accept %q, X-GitHub-Api-Version %q", i, r.Header.Get("Accept"), r.Header.Get("X-GitHub-Api-Version"))
				}
				if diff := cmp.Diff(w.body, r.Body); diff != "" {
					t.Errorf("request %d (%s %s) body (-want +got):\n%s", i, r.Method, r.Path, diff)
				}
			}
			if prs := srv.PRs(); len(prs) != 1 || prs[0].State != "closed" || prs[0].Title != title2 {
				t.Errorf("the provider holds %+v, want one request, closed, titled %q", prs, title2)
			}
		})
	}
}

// The request's body lists each change's file, line, image, old → new
// value and policy, and the commits it stands on.
func TestPullRequestBodyListsEachChange(t *testing.T) {
	u := Outcome{Revision: "1111111aaaa", Commit: "2222222bbbb"}
	u.Changes = prChanges
	got := Body("team/fleet", "main", u)
	for _, line := range []string{
		"| `apps/app.yaml` | 12 | `registry.example.com/team/app` | `registry.example.com/team/app:1.0.0` → `registry.example.com/team/app:1.1.0` | team/app |",
		"| `apps/kustomization.yaml` | 4 | `registry.example.com/team/web` | `2.0.0` → `2.1.0` | team/web |",
		"Commit 2222222, on top of 1111111 of branch `main`.",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("body lacks %q:\n%s", line, got)
		}
	}
}

func TestPullRequestTitle(t *testing.T) {
	tests := []struct{ name, tmpl, want string }{
		{"the default names each new image once, a tag marker with its image", "",
			"Update images: registry.example.com/team/app:1.1.0, registry.example.com/team/web:2.1.0"},
		{"a template sees the changes", "chore: {{len .Changes}} images ({{(index .Changes 0).Policy}})", "chore: 3 images (team/app)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Title(tt.tmpl, append(prChanges, prChanges[1]))
			if err != nil || got != tt.want {
				t.Errorf("Title = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := Title("{{.Nope", prChanges); err == nil || !strings.Contains(err.Error(), "spec.imageUpdate.pullRequest.title is not a Go template") {
		t.Errorf("a bad template: %v", err)
	}
}

func TestDecideKeepsOneRequestPerBranch(t *testing.T) {
	open := &PullRequest{Number: 4, State: v1alpha1.PullRequestOpen}
	last := &v1alpha1.PullRequestStatus{Number: 4, State: v1alpha1.PullRequestOpen, Commit: "c1"}
	tests := []struct {
		name           string
		changes, moved bool
		open           *PullRequest
		last           *v1alpha1.PullRequestStatus
		commit         string
		want           Action
	}{
		{"a first change opens one", true, true, nil, nil, "c1", ActionOpen},
		{"a newer change updates the open one", true, true, open, last, "c2", ActionEdit},
		{"the same change asks nothing", true, false, open, last, "c1", ActionNone},
		{"an open request not recorded yet is updated, not doubled", true, false, open, nil, "c1", ActionEdit},
		{"a change whose request was closed by a person is not proposed again", true, false, nil, last, "c1", actionLookup},
		{"a change whose push succeeded but whose request failed to open is opened", true, false, nil, nil, "c1", ActionOpen},
		{"a newer change after a merge opens a new one", true, true, nil, &v1alpha1.PullRequestStatus{Number: 4, State: v1alpha1.PullRequestMerged, Commit: "c1"}, "c2", ActionOpen},
		{"a base that has the changes closes the open one", false, false, open, last, "", ActionClose},
		{"a base that has the changes, nothing open: only the last one's state is read", false, false, nil, last, "", actionLookup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.changes, tt.moved, tt.open, tt.last, tt.commit); got != tt.want {
				t.Errorf("decide = %q, want %q", got, tt.want)
			}
		})
	}
}

// Requests from forks with the same branch name are not the robot's.
func TestFindOpenIgnoresForks(t *testing.T) {
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		t.Run(provider, func(t *testing.T) {
			srv := forgetest.New(t, provider, "ops/fleet")
			srv.Add(forgetest.PR{Head: "image-updates", Base: "main", State: "open", ProjectID: 7, SourceProjID: 9})
			srv.Add(forgetest.PR{Head: "other", Base: "main", State: "open"})
			own := srv.Add(forgetest.PR{Head: "image-updates", Base: "main", State: "open"})
			f := &Forge{Provider: v1alpha1.PullRequestProvider(provider), Address: srv.Address(), Repo: "ops/fleet", Token: prToken}
			got, err := f.FindOpen(context.Background(), "image-updates")
			if err != nil || got == nil || got.Number != own {
				t.Errorf("FindOpen = %+v, %v; want #%d", got, err, own)
			}
		})
	}
}

// The token goes only to the address: a redirect is not followed, and an
// answer that repeats the token shows it masked.
func TestPullRequestTokenStaysWithTheAPI(t *testing.T) {
	away := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect was followed: %s %s with Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
	}))
	defer away.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, away.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	echoing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"message":"token ` + prToken + ` is revoked"}`))
	}))
	defer echoing.Close()
	for _, tc := range []struct{ name, address, want string }{
		{"a redirect", redirecting.URL, "a redirect, which is not followed because the request carries the token"},
		{"an answer repeating the token", echoing.URL, "401 Unauthorized: token *** is revoked (check the token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, provider := range []string{"github", "gitlab", "gitea"} {
				f := &Forge{Provider: v1alpha1.PullRequestProvider(provider), Address: tc.address, Repo: "ops/fleet", Token: prToken}
				_, err := f.FindOpen(context.Background(), "image-updates")
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want it to say %q", provider, err, tc.want)
				}
				if err != nil && strings.Contains(err.Error(), prToken[:8]) {
					t.Errorf("%s: the error shows the token: %v", provider, err)
				}
			}
		})
	}
}

// Gitea takes label ids: a label the repository lacks stops the request
// from being opened, and the error names it.
func TestGiteaRefusesALabelTheRepositoryLacks(t *testing.T) {
	srv := forgetest.New(t, "gitea", "ops/fleet")
	srv.Labels = []string{"images"}
	f := &Forge{Provider: v1alpha1.ProviderGitea, Address: srv.Address(), Repo: "ops/fleet", Token: prToken}
	u := Outcome{Revision: strings.Repeat("a", 40), Commit: strings.Repeat("b", 40), Pushed: true}
	u.Changes = prChanges
	_, err := Propose(context.Background(), Proposal{Forge: f, Sync: "team/fleet", Head: "image-updates", Base: "main", Labels: []string{"images", "robot"}, Update: u})
	if err == nil || !strings.Contains(err.Error(), "repository ops/fleet has no label robot: create it, or remove it from spec.imageUpdate.pullRequest.labels") {
		t.Errorf("Propose: %v, want the missing label named", err)
	}
	if prs := srv.PRs(); len(prs) != 0 {
		t.Errorf("opened %+v", prs)
	}
}

// An http:// API address on a host that is not loopback would carry the
// token in clear: it is refused before any request, unless the pull
// request settings say insecure. (The client dials the loopback recorder
// whatever the address names, so a request that was sent would arrive.)
func TestPullRequestTokenIsNotSentInClear(t *testing.T) {
	srv := forgetest.New(t, "gitea", "ops/fleet")
	toRecorder := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, strings.TrimPrefix(srv.URL, "http://"))
	}}}
	remote := "http://gitea.example:3000" + srv.Prefix
	for _, tc := range []struct {
		name     string
		address  string
		insecure bool
		want     string // in the error; "" for a request that is sent
	}{
		{"plain http to another host is refused", remote, false,
			"spec.imageUpdate.pullRequest.address " + remote + " is plain http to gitea.example, which is not a loopback address: the token would cross the network in clear; use https, or set spec.imageUpdate.pullRequest.insecure: true"},
		{"plain http to another host with insecure is sent", remote, true, ""},
		{"plain http to loopback is sent", srv.Address(), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.Requests())
			f := &Forge{Provider: v1alpha1.ProviderGitea, Address: tc.address, Insecure: tc.insecure, Repo: "ops/fleet", Token: prToken, Client: toRecorder}
			_, err := f.FindOpen(context.Background(), "image-updates")
			sent := len(srv.Requests()) - before
			if tc.want == "" {
				if err != nil || sent == 0 {
					t.Fatalf("FindOpen: %v, %d requests; want it sent", err, sent)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FindOpen: error %v, want it to say %q", err, tc.want)
			}
			if sent != 0 {
				t.Fatalf("%d requests reached the API with the token", sent)
			}
			if err := CheckAddress(tc.address, tc.insecure); err == nil {
				t.Fatalf("CheckAddress(%s) accepts what Forge refuses", tc.address)
			}
		})
	}
}
