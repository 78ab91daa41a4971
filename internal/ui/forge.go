package ui

import (
	"net/url"
	"strconv"
	"strings"
)

// fileLink is the forge's page of file at revision, at line when not 0,
// for a repository on GitHub, GitLab or Gitea (Forgejo, Codeberg); "" for
// any other host or an address it cannot read. gitURL is the Sync's
// spec.source.git.url, in any of git's forms (https://, ssh://,
// git@host:path).
func fileLink(gitURL, revision, file string, line int) string {
	// An origin: "path#doc", or "kustomization → file".
	if _, from, ok := strings.Cut(file, " → "); ok {
		file = from
	}
	file, _, _ = strings.Cut(file, "#")
	if revision == "" || file == "" {
		return ""
	}
	host, repo := repoOf(gitURL)
	if host == "" || repo == "" {
		return ""
	}
	base := "https://" + host + "/" + repo
	path := (&url.URL{Path: file}).EscapedPath()
	anchor := ""
	if line > 0 {
		anchor = "#L" + strconv.Itoa(line)
	}
	switch forgeOf(host) {
	case "github":
		return base + "/blob/" + revision + "/" + path + anchor
	case "gitlab":
		return base + "/-/blob/" + revision + "/" + path + anchor
	case "gitea":
		return base + "/src/commit/" + revision + "/" + path + anchor
	}
	return ""
}

// commitLink is the forge's page of a commit; "" as fileLink.
func commitLink(gitURL, revision string) string {
	host, repo := repoOf(gitURL)
	if host == "" || repo == "" || revision == "" {
		return ""
	}
	base := "https://" + host + "/" + repo
	switch forgeOf(host) {
	case "github":
		return base + "/commit/" + revision
	case "gitlab":
		return base + "/-/commit/" + revision
	case "gitea":
		return base + "/commit/" + revision
	}
	return ""
}

// forgeOf names the forge a host runs, by its name: github.com,
// gitlab.com or a host named gitlab.*, gitea.* or forgejo.*, codeberg.org.
func forgeOf(host string) string {
	h := strings.ToLower(host)
	switch {
	case h == "github.com":
		return "github"
	case h == "gitlab.com", strings.HasPrefix(h, "gitlab."):
		return "gitlab"
	case h == "codeberg.org", strings.HasPrefix(h, "gitea."), strings.HasPrefix(h, "forgejo."):
		return "gitea"
	}
	return ""
}

// repoOf reads the host (without port or user) and the repository path
// (without ".git") of a git address.
func repoOf(gitURL string) (host, repo string) {
	s := gitURL
	if !strings.Contains(s, "://") {
		// scp-like: git@github.com:org/repo.git
		at := strings.LastIndex(s, "@")
		colon := strings.Index(s, ":")
		if colon < 0 || colon < at {
			return "", ""
		}
		host, repo = s[at+1:colon], s[colon+1:]
	} else {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "file" {
			return "", ""
		}
		host, repo = u.Hostname(), u.Path
	}
	repo = strings.TrimSuffix(strings.Trim(repo, "/"), ".git")
	if host == "" || repo == "" || strings.Contains(repo, "..") {
		return "", ""
	}
	return host, repo
}
