package receiver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Push is what a push notice says: which repository, by every address the
// payload gives for it, and which references moved.
type Push struct {
	// Repositories are the addresses of the pushed repository that the
	// payload names (HTTPS and SSH clone URLs, web page); a Sync matches
	// when its URL names the same repository as any of them.
	Repositories []string
	// Refs are the full names of the pushed references, such as
	// refs/heads/main or refs/tags/v1.2.0.
	Refs []string
	// Artifacts are the tags pushed to registry repositories (Harbor and
	// registry endpoints); they wake Syncs with spec.source.oci.
	Artifacts []Artifact
}

// Parsers of each provider's push payload. Each returns an error when the
// body is not JSON of that shape or names no repository or no ref; it
// never fails on fields it does not read.

// parseGitHub reads a GitHub push event, which Gitea and Forgejo copy
// (ref; repository.clone_url, ssh_url, html_url, git_url, url).
func parseGitHub(body []byte) (Push, error) {
	var p struct {
		Ref        string `json:"ref"`
		Repository struct {
			CloneURL string `json:"clone_url"`
			SSHURL   string `json:"ssh_url"`
			HTMLURL  string `json:"html_url"`
			GitURL   string `json:"git_url"`
			URL      string `json:"url"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return Push{}, err
	}
	r := p.Repository
	return newPush([]string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL, r.URL}, []string{p.Ref}, "repository.clone_url", "ref")
}

// parseGitLab reads a GitLab Push Hook or Tag Push Hook (ref;
// project.git_http_url, git_ssh_url, web_url; the deprecated repository
// block).
func parseGitLab(body []byte) (Push, error) {
	var p struct {
		Ref     string `json:"ref"`
		Project struct {
			GitHTTPURL string `json:"git_http_url"`
			GitSSHURL  string `json:"git_ssh_url"`
			WebURL     string `json:"web_url"`
		} `json:"project"`
		Repository struct {
			GitHTTPURL string `json:"git_http_url"`
			GitSSHURL  string `json:"git_ssh_url"`
			Homepage   string `json:"homepage"`
		} `json:"repository"`
	}
	if err := decode(body, &p); err != nil {
		return Push{}, err
	}
	urls := []string{p.Project.GitHTTPURL, p.Project.GitSSHURL, p.Project.WebURL,
		p.Repository.GitHTTPURL, p.Repository.GitSSHURL, p.Repository.Homepage}
	return newPush(urls, []string{p.Ref}, "project.git_http_url", "ref")
}

// parseBitbucket reads a Bitbucket Server (Data Center) repo:refs_changed
// event: repository.links.clone[].href and changes[].ref.id (or refId).
func parseBitbucket(body []byte) (Push, error) {
	var p struct {
		Repository struct {
			Links struct {
				Clone []struct {
					Href string `json:"href"`
				} `json:"clone"`
			} `json:"links"`
		} `json:"repository"`
		Changes []struct {
			RefID string `json:"refId"`
			Ref   struct {
				ID string `json:"id"`
			} `json:"ref"`
		} `json:"changes"`
	}
	if err := decode(body, &p); err != nil {
		return Push{}, err
	}
	var urls, refs []string
	for _, c := range p.Repository.Links.Clone {
		urls = append(urls, c.Href)
	}
	for _, c := range p.Changes {
		if c.Ref.ID != "" {
			refs = append(refs, c.Ref.ID)
		} else {
			refs = append(refs, c.RefID)
		}
	}
	return newPush(urls, refs, "repository.links.clone[].href", "changes[].ref.id")
}

// parseGeneric reads the generic endpoint's body:
//
//	{"repository": "<clone URL>", "ref": "refs/heads/main"}
func parseGeneric(body []byte) (Push, error) {
	var p struct {
		Repository string `json:"repository"`
		Ref        string `json:"ref"`
	}
	if err := decode(body, &p); err != nil {
		return Push{}, err
	}
	push, err := newPush([]string{p.Repository}, []string{p.Ref}, "repository", "ref")
	if err != nil {
		return Push{}, err
	}
	if !strings.HasPrefix(p.Ref, "refs/heads/") && !strings.HasPrefix(p.Ref, "refs/tags/") {
		return Push{}, fmt.Errorf("ref %q is not a full branch or tag name: write refs/heads/<branch> or refs/tags/<tag>", p.Ref)
	}
	return push, nil
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the body is not a push payload: %w", err)
	}
	return nil
}

// newPush keeps the non-empty addresses and refs, and fails when either
// is missing, naming the payload fields that should hold them.
func newPush(urls, refs []string, urlField, refField string) (Push, error) {
	var p Push
	for _, u := range urls {
		if u = strings.TrimSpace(u); u != "" {
			p.Repositories = append(p.Repositories, u)
		}
	}
	for _, r := range refs {
		if r = strings.TrimSpace(r); r != "" {
			p.Refs = append(p.Refs, r)
		}
	}
	var errs []error
	if len(p.Repositories) == 0 {
		errs = append(errs, fmt.Errorf("the payload names no repository: %s is empty", urlField))
	}
	if len(p.Refs) == 0 {
		errs = append(errs, fmt.Errorf("the payload names no ref: %s is empty", refField))
	}
	if err := errors.Join(errs...); err != nil {
		return Push{}, err
	}
	return p, nil
}
