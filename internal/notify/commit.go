package notify

import (
	"strings"

	"github.com/driftless/driftless/internal/source"
)

// CommitURL is the web page of revision in the repository at gitURL, for
// the hosts whose page addresses are known: github.com and hosts named
// github.*, gitlab.com and gitlab.*, codeberg.org and gitea.*, forgejo.*
// (https://<host>/<path>/commit/<sha>; GitLab's /-/commit/<sha>). An
// SSH address (ssh:// or scp-like git@host:path) links to the same host
// over https, without the SSH port; an http:// address keeps its scheme
// and port. Otherwise, or for an empty revision, it is "".
func CommitURL(gitURL, revision string) string {
	host, repo, ok := source.RepositoryAddress(gitURL)
	if !ok || revision == "" {
		return ""
	}
	scheme := "https"
	lower := strings.ToLower(gitURL)
	switch {
	case strings.HasPrefix(lower, "http://"):
		scheme = "http"
	case strings.HasPrefix(lower, "https://"):
	default: // ssh: the web server is on the default port
		host, _, _ = strings.Cut(host, ":")
	}
	name, _, _ := strings.Cut(host, ":")
	page := "/commit/"
	switch {
	case name == "github.com" || strings.HasPrefix(name, "github."):
	case name == "gitlab.com" || strings.HasPrefix(name, "gitlab."):
		page = "/-/commit/"
	case name == "codeberg.org" || strings.HasPrefix(name, "gitea.") || strings.HasPrefix(name, "forgejo."):
	default:
		return ""
	}
	return scheme + "://" + host + "/" + repo + page + revision
}
