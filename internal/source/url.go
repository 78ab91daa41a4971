package source

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Protocols of repository addresses, as Protocol returns them.
const (
	ProtocolSSH   = "ssh"
	ProtocolHTTPS = "https"
	ProtocolHTTP  = "http"
	ProtocolGit   = "git"
	ProtocolFile  = "file"
)

// hasScheme and scpLike tell URLs from scp-like addresses the way go-git
// does (its internal/url), so that Protocol accepts what Resolve fetches.
var (
	hasScheme = regexp.MustCompile(`^[^:]+://`)
	scpLike   = regexp.MustCompile(`^(?:(?P<user>[^@]+)@)?(?P<host>[^:\s]+):(?:(?P<port>[0-9]{1,5}):)?(?P<path>[^\\].*)$`)
)

// Protocol returns the transport of a repository address — ssh, https,
// http, git or file — checking it without the network: a URL with a
// supported scheme, a host (none for file://) and a repository path; an
// scp-like address (git@github.com:org/repo.git, which is SSH); or an
// absolute local path (file). It accepts every address Resolve can
// fetch, except paths relative to the agent's working directory.
//
// The error says what is wrong and what to write instead; it never
// repeats raw, which may hold a password: callers name the address with
// Redact.
func Protocol(raw string) (string, error) {
	switch {
	case raw == "":
		return "", errors.New("is empty: set it to ssh://git@<host>/<org>/<repo>.git or https://<host>/<org>/<repo>.git")
	case strings.TrimSpace(raw) != raw:
		return "", errors.New("begins or ends with whitespace: remove it")
	case hasScheme.MatchString(raw):
		return urlProtocol(raw)
	case strings.HasPrefix(raw, "/"):
		return ProtocolFile, nil
	case isSCPLike(raw):
		return scpProtocol(raw)
	}
	return "", errors.New("is neither a URL (ssh://, https://, http:// or file://) nor an scp-like address (git@<host>:<org>/<repo>.git): " +
		"write it with its scheme, such as https://<host>/<org>/<repo>.git; a path relative to the agent's working directory is not supported")
}

// isSCPLike mirrors go-git: an scp-like address has no "/" before its
// first ":" (else it is a local path such as ./a:b).
func isSCPLike(raw string) bool {
	if !scpLike.MatchString(raw) {
		return false
	}
	before, _, _ := strings.Cut(raw, ":")
	return !strings.Contains(before, "/")
}

func urlProtocol(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return "", fmt.Errorf("is not a valid URL: %w", err)
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case ProtocolSSH, ProtocolHTTPS, ProtocolHTTP, ProtocolGit:
	case ProtocolFile:
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("is a file URL with host %q: write file:///<absolute path> (three slashes)", u.Host)
		}
		if u.Path == "" || u.Path == "/" {
			return "", errors.New("is a file URL without a path: write file:///<absolute path to the repository>")
		}
		return ProtocolFile, nil
	default:
		return "", fmt.Errorf("has the unsupported scheme %q: use ssh://, https://, http:// or file://, "+
			"or an scp-like address (git@<host>:<org>/<repo>.git)", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("has no host: write %s://<host>/<org>/<repo>.git", scheme)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("has the port %q, which is not between 1 and 65535", p)
		}
	}
	if strings.Trim(u.Path, "/") == "" {
		return "", fmt.Errorf("names no repository (its path is empty): write %s://%s/<org>/<repo>.git", scheme, u.Host)
	}
	return scheme, nil
}

func scpProtocol(raw string) (string, error) {
	m := scpLike.FindStringSubmatch(raw)
	host, repo := m[2], m[4]
	switch strings.ToLower(host) {
	case ProtocolSSH, ProtocolHTTPS, ProtocolHTTP, ProtocolGit, ProtocolFile:
		// https:/github.com/org/repo or https:github.com/...: a URL
		// missing a slash, which go-git would take for SSH to host "https".
		return "", fmt.Errorf("looks like a URL with a malformed %q: write %s://<host>/<org>/<repo>.git", host+":", strings.ToLower(host))
	}
	if strings.Trim(repo, "/") == "" {
		return "", fmt.Errorf("names no repository (nothing after %q): write %s:<org>/<repo>.git", host+":", host)
	}
	return ProtocolSSH, nil
}

// CheckRef reports, without the network, whether ref can name anything:
// a branch or tag must be a valid git reference name (no spaces, "..",
// "~", "^", ":", "?", "*", "[", "\\", no leading "-", "." or trailing
// ".lock").
// A valid name may still not exist; Resolve finds that out.
func CheckRef(ref Ref) error {
	switch {
	case ref.Branch != "":
		if plumbing.NewBranchReferenceName(ref.Branch).Validate() != nil {
			return fmt.Errorf("branch %q is not a valid git branch name: check spec.source.git.branch", ref.Branch)
		}
	case ref.Tag != "":
		if plumbing.NewTagReferenceName(ref.Tag).Validate() != nil {
			return fmt.Errorf("tag %q is not a valid git tag name: check spec.source.git.tag", ref.Tag)
		}
	}
	return nil
}
