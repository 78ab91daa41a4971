package source

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// ResolveName resolves name, a ref as a Kustomize remote base writes it
// (?ref=): a full commit hash (pinned, no request), a tag, or a branch,
// tried in that order as git does; empty is the repository's default
// branch. It returns the ref it found, and its commit. The error names
// the repository without a credential.
func ResolveName(ctx context.Context, req Request, name string) (Ref, string, error) {
	if plumbing.IsHash(name) {
		return Ref{Commit: name}, name, nil
	}
	auth, err := req.Credentials.authMethod(req.URL)
	if err != nil {
		return Ref{}, "", err
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{req.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return Ref{}, "", remoteError(req, err)
	}
	byName := map[string]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name().String()] = r
	}
	if name == "" {
		head := byName["HEAD"]
		if head != nil && head.Type() == plumbing.SymbolicReference && head.Target().IsBranch() {
			name = head.Target().Short()
		} else {
			for _, r := range refs {
				if head != nil && r.Name().IsBranch() && r.Hash() == head.Hash() {
					name = r.Name().Short()
					break
				}
			}
		}
		if name == "" {
			return Ref{}, "", fmt.Errorf("%s has no default branch: name a ref with ?ref=", Redact(req.URL))
		}
	}
	tag := plumbing.NewTagReferenceName(name).String()
	if r := byName[tag+"^{}"]; r != nil {
		return Ref{Tag: name}, r.Hash().String(), nil
	}
	if r := byName[tag]; r != nil {
		return Ref{Tag: name}, r.Hash().String(), nil
	}
	if r := byName[plumbing.NewBranchReferenceName(name).String()]; r != nil {
		return Ref{Branch: name}, r.Hash().String(), nil
	}
	return Ref{}, "", fmt.Errorf("ref %q is neither a tag nor a branch of %s", name, Redact(req.URL))
}

// remoteError words a transport failure of a repository that is not the
// Sync's own.
func remoteError(req Request, err error) error {
	msg := redactAll(err.Error(), req)
	switch {
	case err == transport.ErrAuthenticationRequired, err == transport.ErrAuthorizationFailed:
		return fmt.Errorf("fetch %s: %s: a remote base is fetched anonymously, or with the Sync's own credentials when it is on the same server (scheme, host and port; https or ssh) as the Sync's repository", Redact(req.URL), msg)
	case err == transport.ErrRepositoryNotFound:
		return fmt.Errorf("fetch %s: repository not found", Redact(req.URL))
	}
	return fmt.Errorf("fetch %s: %s", Redact(req.URL), msg)
}

// SharesCredentials reports whether the credentials of the repository at
// own may be sent to the repository at other: only to the same server —
// same protocol, host and port — and only over a protocol that does not
// send them in the clear: a token or password over https://, a deploy key
// over ssh://. A token is never sent over http://, and never to another
// port of the same host, which may be another service.
func SharesCredentials(own, other string) bool {
	a, b := endpoint(own), endpoint(other)
	if a == nil || b == nil {
		return false
	}
	switch a.Protocol {
	case "https", "ssh":
	default:
		return false
	}
	return a.Protocol == b.Protocol && strings.EqualFold(a.Host, b.Host) && port(a) == port(b)
}

// endpoint parses a repository address (a URL or an scp-like
// git@host:org/repo); nil if it is not one.
func endpoint(raw string) *transport.Endpoint {
	ep, err := transport.NewEndpoint(raw)
	if err != nil || ep.Host == "" {
		return nil
	}
	ep.Protocol = strings.ToLower(ep.Protocol)
	return ep
}

// port returns the port ep connects to, the protocol's own when it names
// none.
func port(ep *transport.Endpoint) int {
	if ep.Port != 0 {
		return ep.Port
	}
	return map[string]int{"https": 443, "http": 80, "ssh": 22, "git": 9418}[ep.Protocol]
}
