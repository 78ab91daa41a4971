// Package forgetest is a recording server on loopback that answers the
// pull request API of GitHub, GitLab or Gitea for one repository, as
// the provider documents it: the paths, methods, headers and JSON
// fields image update's PullRequest mode uses. It records every request
// so a test can check each one, and keeps the requests' state so a test
// can merge one as a person would. It stands in for the provider's
// server only: the git server and the registry are real.
package forgetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Request is one request the server received.
type Request struct {
	Method string
	// Path is the escaped path, RawQuery the query.
	Path, RawQuery string
	Header         http.Header
	Body           map[string]any
}

// PR is a pull (merge) request as the server holds it.
type PR struct {
	Number       int
	Head, Base   string
	Title, Body  string
	Labels       []string
	State        string // open, closed, merged
	ProjectID    int
	SourceProjID int
}

// Server answers one provider's API for one repository.
type Server struct {
	*httptest.Server
	// Provider is github, gitlab or gitea.
	Provider string
	// Prefix is the API's path prefix ("", /api/v4, /api/v1).
	Prefix string
	// Repo is owner/repo or the GitLab project path.
	Repo string
	// Labels are the repository's labels (Gitea needs their ids).
	Labels []string

	mu   sync.Mutex
	reqs []Request
	prs  []*PR
}

// New starts a server for provider and repo; it stops with the test.
func New(t *testing.T, provider, repo string) *Server {
	t.Helper()
	s := &Server{Provider: provider, Repo: repo}
	switch provider {
	case "gitlab":
		s.Prefix = "/api/v4"
	case "gitea":
		s.Prefix = "/api/v1"
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// Address is the API base URL to configure.
func (s *Server) Address() string { return s.URL + s.Prefix }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// PRs returns a copy of every request ever opened.
func (s *Server) PRs() []PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PR, 0, len(s.prs))
	for _, p := range s.prs {
		out = append(out, *p)
	}
	return out
}

// Merge marks request number merged, as a person merging it would.
func (s *Server) Merge(number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prs[number-1].State = "merged"
}

// Add holds a request opened by someone else (another head repository
// with ProjectID/SourceProjID, for instance); it returns its number.
func (s *Server) Add(p PR) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Number = len(s.prs) + 1
	s.prs = append(s.prs, &p)
	return p.Number
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, `{"message":"body is not JSON"}`, http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	if !s.authorized(r) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"message":"Bad credentials"}`)
		return
	}
	base := s.Prefix + "/repos/" + s.Repo
	if s.Provider == "gitlab" {
		base = s.Prefix + "/projects/" + url.PathEscape(s.Repo)
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), base)
	if !ok {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	coll := "/pulls"
	if s.Provider == "gitlab" {
		coll = "/merge_requests"
	}
	switch {
	case r.Method == http.MethodGet && rest == coll:
		var list []any
		for _, p := range s.prs {
			if s.listed(p, q) {
				list = append(list, s.wire(p))
			}
		}
		if list == nil {
			list = []any{}
		}
		s.reply(w, http.StatusOK, list)
	case r.Method == http.MethodPost && rest == coll:
		p := &PR{Number: len(s.prs) + 1, State: "open", Title: str(body["title"])}
		if s.Provider == "gitlab" {
			p.Head, p.Base, p.Body = str(body["source_branch"]), str(body["target_branch"]), str(body["description"])
			if l := str(body["labels"]); l != "" {
				p.Labels = strings.Split(l, ",")
			}
		} else {
			p.Head, p.Base, p.Body = str(body["head"]), str(body["base"]), str(body["body"])
			if ids, ok := body["labels"].([]any); ok {
				for _, id := range ids {
					p.Labels = append(p.Labels, s.Labels[int(id.(float64))-1])
				}
			}
		}
		s.prs = append(s.prs, p)
		s.reply(w, http.StatusCreated, s.wire(p))
	case r.Method == http.MethodGet && rest == "/labels" && s.Provider == "gitea":
		list := []any{}
		for i, l := range s.Labels {
			list = append(list, map[string]any{"id": i + 1, "name": l})
		}
		s.reply(w, http.StatusOK, list)
	case strings.HasPrefix(rest, "/issues/") && strings.HasSuffix(rest, "/labels") && r.Method == http.MethodPost && s.Provider == "github":
		p := s.pr(strings.TrimSuffix(strings.TrimPrefix(rest, "/issues/"), "/labels"))
		if p == nil {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		for _, l := range body["labels"].([]any) {
			p.Labels = append(p.Labels, str(l))
		}
		s.reply(w, http.StatusOK, []any{})
	case strings.HasPrefix(rest, coll+"/"):
		p := s.pr(strings.TrimPrefix(rest, coll+"/"))
		if p == nil {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		switch r.Method {
		case http.MethodGet:
		case http.MethodPatch, http.MethodPut:
			if v, ok := body["title"]; ok {
				p.Title = str(v)
			}
			if v, ok := body["body"]; ok {
				p.Body = str(v)
			}
			if v, ok := body["description"]; ok {
				p.Body = str(v)
			}
			if body["state"] == "closed" || body["state_event"] == "close" {
				p.State = "closed"
			}
		default:
			http.Error(w, `{"message":"Method Not Allowed"}`, http.StatusMethodNotAllowed)
			return
		}
		s.reply(w, http.StatusOK, s.wire(p))
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	switch s.Provider {
	case "gitlab":
		return r.Header.Get("PRIVATE-TOKEN") != ""
	case "gitea":
		return strings.HasPrefix(r.Header.Get("Authorization"), "token ")
	default:
		return strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
}

// listed reports whether the provider's list with query q holds p.
func (s *Server) listed(p *PR, q url.Values) bool {
	switch s.Provider {
	case "gitlab":
		return (q.Get("state") != "opened" || p.State == "open") && (q.Get("source_branch") == "" || q.Get("source_branch") == p.Head)
	case "github":
		owner, _, _ := strings.Cut(s.Repo, "/")
		if p.SourceProjID != 0 {
			owner = fmt.Sprintf("fork-%d", p.SourceProjID)
		}
		return (q.Get("state") != "open" || p.State == "open") && (q.Get("head") == "" || q.Get("head") == owner+":"+p.Head)
	default:
		return q.Get("state") != "open" || p.State == "open"
	}
}

// wire is p as the provider writes it.
func (s *Server) wire(p *PR) map[string]any {
	web := s.URL + "/" + s.Repo
	switch s.Provider {
	case "gitlab":
		state := map[string]string{"open": "opened"}[p.State]
		if state == "" {
			state = p.State
		}
		project, source := p.ProjectID, p.SourceProjID
		if project == 0 {
			project, source = 7, 7
		}
		return map[string]any{"iid": p.Number, "id": 1000 + p.Number, "web_url": web + "/-/merge_requests/" + strconv.Itoa(p.Number),
			"state": state, "source_branch": p.Head, "target_branch": p.Base, "title": p.Title, "project_id": project, "source_project_id": source}
	default:
		state, merged := p.State, p.State == "merged"
		if merged {
			state = "closed"
		}
		headRepo := s.Repo
		if p.SourceProjID != 0 {
			headRepo = fmt.Sprintf("fork-%d/%s", p.SourceProjID, s.Repo)
		}
		w := map[string]any{"number": p.Number, "html_url": web + "/pull/" + strconv.Itoa(p.Number), "state": state, "merged": merged,
			"title": p.Title, "head": map[string]any{"ref": p.Head, "repo": map[string]any{"full_name": headRepo}}, "base": map[string]any{"ref": p.Base}}
		if merged {
			w["merged_at"] = "2026-01-01T00:00:00Z"
		} else {
			w["merged_at"] = nil
		}
		return w
	}
}

func (s *Server) pr(number string) *PR {
	n, err := strconv.Atoi(number)
	if err != nil || n < 1 || n > len(s.prs) {
		return nil
	}
	return s.prs[n-1]
}

func (s *Server) reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
