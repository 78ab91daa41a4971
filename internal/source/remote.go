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
		return fmt.Errorf("fetch %s: %s: a remote base is fetched anonymously, or with the Sync's own credentials when it is on the same host as the Sync's repository", Redact(req.URL), msg)
	case err == transport.ErrRepositoryNotFound:
		return fmt.Errorf("fetch %s: repository not found", Redact(req.URL))
	}
	return fmt.Errorf("fetch %s: %s", Redact(req.URL), msg)
}

// Host returns the host of a repository address (a URL or an scp-like
// git@host:org/repo), lowercased, without the port; "" for a local path or file:// URL.
func Host(raw string) string {
	ep, err := transport.NewEndpoint(raw)
	if err != nil || ep.Protocol == ProtocolFile {
		return ""
	}
	return strings.ToLower(ep.Host)
}
