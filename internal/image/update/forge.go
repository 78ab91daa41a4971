package update

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/redact"
)

// DefaultAddresses are the API base URLs of the providers that have a
// public default.
var DefaultAddresses = map[v1alpha1.PullRequestProvider]string{
	v1alpha1.ProviderGitHub: "https://api.github.com",
	v1alpha1.ProviderGitLab: "https://gitlab.com/api/v4",
}

// maxGiteaPages bounds the pages of open pull requests (and labels) read
// from Gitea, whose list cannot be filtered by head branch.
const maxGiteaPages = 20

const giteaPage = 50

// Forge is one repository on a provider's API, and the token the
// requests carry. The token goes only to Address, in the Authorization
// (GitLab: PRIVATE-TOKEN) header: redirects are not followed, and no
// error holds it.
type Forge struct {
	Provider v1alpha1.PullRequestProvider
	// Address is the API base URL, such as https://api.github.com.
	Address string
	// Repo is owner/repo (GitHub, Gitea) or the project's path (GitLab).
	Repo  string
	Token string
	// Insecure allows a plain http:// Address on a host that is not
	// loopback (see CheckAddress).
	Insecure bool
	// Client sends the requests; nil is a client with a 30 s timeout.
	Client *http.Client
}

// PullRequest is a pull (GitLab: merge) request as the provider reports it.
type PullRequest struct {
	Number int
	URL    string
	State  v1alpha1.PullRequestState
}

// NewPullRequest is what Open creates.
type NewPullRequest struct {
	Head, Base, Title, Body string
	Labels                  []string
}

// FindOpen returns the open request whose head is branch of Repo itself
// (not a fork's), or nil.
func (f *Forge) FindOpen(ctx context.Context, branch string) (*PullRequest, error) {
	var list []wirePR
	switch f.Provider {
	case v1alpha1.ProviderGitLab:
		q := url.Values{"source_branch": {branch}, "state": {"opened"}}
		if err := f.call(ctx, http.MethodGet, f.project()+"/merge_requests?"+q.Encode(), nil, &list); err != nil {
			return nil, err
		}
	case v1alpha1.ProviderGitHub:
		owner, _, _ := strings.Cut(f.Repo, "/")
		q := url.Values{"head": {owner + ":" + branch}, "state": {"open"}}
		if err := f.call(ctx, http.MethodGet, f.repos()+"/pulls?"+q.Encode(), nil, &list); err != nil {
			return nil, err
		}
	default:
		// Gitea filters by state only: every page is read until a short one.
		for page := 1; page <= maxGiteaPages; page++ {
			var got []wirePR
			q := url.Values{"state": {"open"}, "page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(giteaPage)}}
			if err := f.call(ctx, http.MethodGet, f.repos()+"/pulls?"+q.Encode(), nil, &got); err != nil {
				return nil, err
			}
			list = append(list, got...)
			if len(got) < giteaPage {
				break
			}
		}
	}
	for _, w := range list {
		if f.Provider == v1alpha1.ProviderGitLab && w.SourceProjectID == w.ProjectID ||
			f.Provider != v1alpha1.ProviderGitLab && (w.Head.Ref == branch && (w.Head.Repo.FullName == "" || strings.EqualFold(w.Head.Repo.FullName, f.Repo))) {
			pr := w.pullRequest()
			return &pr, nil
		}
	}
	return nil, nil
}

// Get returns request number.
func (f *Forge) Get(ctx context.Context, number int) (PullRequest, error) {
	var w wirePR
	if err := f.call(ctx, http.MethodGet, f.pull(number), nil, &w); err != nil {
		return PullRequest{}, err
	}
	return w.pullRequest(), nil
}

// Open creates a request and labels it. On GitHub the labels are added
// by a second request: when it fails, the request is open and the error
// says so.
func (f *Forge) Open(ctx context.Context, n NewPullRequest) (PullRequest, error) {
	var w wirePR
	switch f.Provider {
	case v1alpha1.ProviderGitLab:
		body := map[string]any{"source_branch": n.Head, "target_branch": n.Base, "title": n.Title, "description": n.Body}
		if len(n.Labels) > 0 {
			body["labels"] = strings.Join(n.Labels, ",")
		}
		if err := f.call(ctx, http.MethodPost, f.project()+"/merge_requests", body, &w); err != nil {
			return PullRequest{}, err
		}
	case v1alpha1.ProviderGitea:
		body := map[string]any{"head": n.Head, "base": n.Base, "title": n.Title, "body": n.Body}
		if len(n.Labels) > 0 {
			ids, err := f.giteaLabels(ctx, n.Labels)
			if err != nil {
				return PullRequest{}, err
			}
			body["labels"] = ids
		}
		if err := f.call(ctx, http.MethodPost, f.repos()+"/pulls", body, &w); err != nil {
			return PullRequest{}, err
		}
	default:
		body := map[string]any{"head": n.Head, "base": n.Base, "title": n.Title, "body": n.Body}
		if err := f.call(ctx, http.MethodPost, f.repos()+"/pulls", body, &w); err != nil {
			return PullRequest{}, err
		}
		if len(n.Labels) > 0 {
			path := f.repos() + "/issues/" + strconv.Itoa(w.number()) + "/labels"
			if err := f.call(ctx, http.MethodPost, path, map[string]any{"labels": n.Labels}, nil); err != nil {
				return w.pullRequest(), fmt.Errorf("opened #%d, but could not label it: %w", w.number(), err)
			}
		}
	}
	return w.pullRequest(), nil
}

// Edit rewrites the title and body of request number.
func (f *Forge) Edit(ctx context.Context, number int, title, body string) error {
	if f.Provider == v1alpha1.ProviderGitLab {
		return f.call(ctx, http.MethodPut, f.pull(number), map[string]any{"title": title, "description": body}, nil)
	}
	return f.call(ctx, http.MethodPatch, f.pull(number), map[string]any{"title": title, "body": body}, nil)
}

// Close closes request number without merging it.
func (f *Forge) Close(ctx context.Context, number int) error {
	if f.Provider == v1alpha1.ProviderGitLab {
		return f.call(ctx, http.MethodPut, f.pull(number), map[string]any{"state_event": "close"}, nil)
	}
	return f.call(ctx, http.MethodPatch, f.pull(number), map[string]any{"state": "closed"}, nil)
}

// giteaLabels returns the ids of the repository's labels named names
// (Gitea takes ids); a name the repository lacks is an error.
func (f *Forge) giteaLabels(ctx context.Context, names []string) ([]int, error) {
	byName := map[string]int{}
	for page := 1; page <= maxGiteaPages; page++ {
		var got []struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		}
		q := url.Values{"page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(giteaPage)}}
		if err := f.call(ctx, http.MethodGet, f.repos()+"/labels?"+q.Encode(), nil, &got); err != nil {
			return nil, err
		}
		for _, l := range got {
			byName[l.Name] = l.ID
		}
		if len(got) < giteaPage {
			break
		}
	}
	ids := make([]int, 0, len(names))
	var missing []string
	for _, n := range names {
		id, ok := byName[n]
		if !ok {
			missing = append(missing, n)
		}
		ids = append(ids, id)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("repository %s has no label %s: create it, or remove it from spec.imageUpdate.pullRequest.labels", f.Repo, strings.Join(missing, ", "))
	}
	return ids, nil
}

func (f *Forge) repos() string {
	return "/repos/" + (&url.URL{Path: f.Repo}).EscapedPath()
}

func (f *Forge) project() string {
	return "/projects/" + url.PathEscape(f.Repo)
}

func (f *Forge) pull(number int) string {
	if f.Provider == v1alpha1.ProviderGitLab {
		return f.project() + "/merge_requests/" + strconv.Itoa(number)
	}
	return f.repos() + "/pulls/" + strconv.Itoa(number)
}

// call sends one request to Address+path and decodes the answer into out
// (nil: discarded). Its errors name the method and path, never the token.
func (f *Forge) call(ctx context.Context, method, path string, body, out any) error {
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(b)
	}
	if err := CheckAddress(f.Address, f.Insecure); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(f.Address, "/")+path, reader)
	if err != nil {
		return fmt.Errorf("spec.imageUpdate.pullRequest.address %q does not make a request", f.Address)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "driftless-image-update")
	switch f.Provider {
	case v1alpha1.ProviderGitHub:
		req.Header.Set("Authorization", "Bearer "+f.Token)
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	case v1alpha1.ProviderGitLab:
		req.Header.Set("PRIVATE-TOKEN", f.Token)
	default:
		req.Header.Set("Authorization", "token "+f.Token)
		req.Header.Set("Accept", "application/json")
	}
	client := http.Client{Timeout: 30 * time.Second}
	if f.Client != nil {
		client = *f.Client
	}
	// The request carries the token: a redirect would take it (Go keeps
	// PRIVATE-TOKEN, and Authorization to the same host) elsewhere.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	mask := redact.New(f.Token)
	what := method + " " + path
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it names the URL
		}
		return mask.Error(fmt.Errorf("%s: %w", what, err))
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return mask.Error(fmt.Errorf("%s: read the answer: %w", what, err))
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Errorf("%s: the API answered %s, a redirect, which is not followed because the request carries the token: "+
			"set spec.imageUpdate.pullRequest.address to the API's own address", what, resp.Status)
	case resp.StatusCode >= 300:
		msg := providerMessage(answer)
		if msg != "" {
			msg = ": " + msg
		}
		return mask.Error(fmt.Errorf("%s: the API answered %s%s%s", what, resp.Status, msg, advice(resp.StatusCode)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("%s: the answer is not the JSON the %s API returns: %w", what, f.Provider, err)
	}
	return nil
}

// providerMessage is the message of an error answer: GitHub's and
// Gitea's "message", GitLab's "message" or "error" (a string, a list or
// an object), cut to 300 characters.
func providerMessage(answer []byte) string {
	var e struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(answer, &e) != nil {
		return ""
	}
	raw := e.Message
	if len(raw) == 0 {
		raw = e.Error
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	if r := []rune(s); len(r) > 300 {
		s = string(r[:299]) + "…"
	}
	return s
}

func advice(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return " (check the token in spec.imageUpdate.pullRequest.tokenSecretRef)"
	case http.StatusForbidden, http.StatusNotFound:
		return " (check that the token may read and write the repository's pull requests, and that the repository exists)"
	}
	return ""
}

// wirePR is a pull request as GitHub, GitLab and Gitea write it.
type wirePR struct {
	Number   int     `json:"number"`
	IID      int     `json:"iid"`
	HTMLURL  string  `json:"html_url"`
	WebURL   string  `json:"web_url"`
	State    string  `json:"state"`
	Merged   bool    `json:"merged"`
	MergedAt *string `json:"merged_at"`
	// GitLab: a request from a fork has another source project.
	ProjectID       int `json:"project_id"`
	SourceProjectID int `json:"source_project_id"`
	Head            struct {
		Ref  string `json:"ref"`
		Repo struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"head"`
}

func (w wirePR) number() int {
	if w.IID != 0 {
		return w.IID
	}
	return w.Number
}

func (w wirePR) pullRequest() PullRequest {
	pr := PullRequest{Number: w.number(), URL: w.HTMLURL, State: v1alpha1.PullRequestClosed}
	if pr.URL == "" {
		pr.URL = w.WebURL
	}
	switch {
	case w.State == "open" || w.State == "opened":
		pr.State = v1alpha1.PullRequestOpen
	case w.State == "merged" || w.Merged || (w.MergedAt != nil && *w.MergedAt != ""):
		pr.State = v1alpha1.PullRequestMerged
	}
	return pr
}

// CheckAddress refuses an API address that would carry the token in
// clear: http:// is taken only to a loopback host (127.0.0.0/8, ::1,
// localhost), or when insecure (spec.imageUpdate.pullRequest.insecure).
func CheckAddress(address string, insecure bool) error {
	u, err := url.Parse(address)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("spec.imageUpdate.pullRequest.address %q is not a URL such as https://gitea.example.com/api/v1", address)
	}
	switch {
	case strings.EqualFold(u.Scheme, "https"), insecure:
		return nil
	case !strings.EqualFold(u.Scheme, "http"):
		return fmt.Errorf("spec.imageUpdate.pullRequest.address %s has the scheme %q: use https", address, u.Scheme)
	case loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("spec.imageUpdate.pullRequest.address %s is plain http to %s, which is not a loopback address: "+
		"the token would cross the network in clear; use https, or set spec.imageUpdate.pullRequest.insecure: true", address, u.Hostname())
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()
}
