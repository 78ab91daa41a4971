package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// RemoteBases fetches the remote Kustomize bases of a Sync with
// spec.kustomize.allowRemote through the git mirror, so that a base is
// fetched incrementally and shared by every Sync that names it.
type RemoteBases struct {
	// Mirror holds the repositories of remote bases; required.
	Mirror *source.Mirror
	// Source is the Sync's own fetch request: its credentials are used
	// for a remote base on the same server as the Sync's repository (same
	// protocol, host and port; https:// for a token or password, ssh://
	// for a deploy key), and no other. Any other base is fetched
	// anonymously.
	Source source.Request
	// FileURLs lets a remote base be a file:// repository: only for a
	// Sync that may itself read file:// sources.
	FileURLs bool
	// Hosts, when it restricts, are the only hosts a remote base may be
	// fetched from (--tenant-source-hosts for a tenant's Sync).
	Hosts source.Hosts
}

// Fetcher returns the render.RemoteFetcher of b for one render under
// ctx; outside, when not nil, is called at each fetch.
func (b *RemoteBases) Fetcher(ctx context.Context, outside func()) render.RemoteFetcher {
	if outside == nil {
		outside = func() {}
	}
	return remoteFetcher{ctx: ctx, bases: b, outside: outside}
}

// remoteFetcher is RemoteBases for one render.
type remoteFetcher struct {
	ctx     context.Context
	bases   *RemoteBases
	outside func()
}

var _ render.RemoteFetcher = remoteFetcher{}

// FetchRemote resolves the base's ref — a branch is followed, so the
// render reads outside the checkout and is not reused — and returns the
// mirror's read-only tree of that commit.
func (f remoteFetcher) FetchRemote(base render.RemoteBase) (render.RemoteTree, error) {
	f.outside()
	protocol, err := source.Protocol(base.Repo)
	if err != nil {
		return render.RemoteTree{}, fmt.Errorf("repository address %s", err)
	}
	if protocol == source.ProtocolFile && !f.bases.FileURLs {
		return render.RemoteTree{}, errors.New("a file:// repository is a path on the agent, which this Sync may not read: serve it over ssh:// or https://")
	}
	if err := f.bases.Hosts.CheckHost("the remote base "+source.Redact(base.Repo), base.Repo); err != nil {
		return render.RemoteTree{}, err
	}
	req := source.Request{URL: base.Repo}
	if source.SharesCredentials(f.bases.Source.URL, base.Repo) {
		req.Credentials = f.bases.Source.Credentials
	} else {
		req.Credentials.InsecureSkipHostKeyCheck = f.bases.Source.Credentials.InsecureSkipHostKeyCheck
	}
	ref, revision, err := source.ResolveName(f.ctx, req, base.Ref)
	if err != nil {
		return render.RemoteTree{}, err
	}
	req.Ref = ref
	tree, err := f.bases.Mirror.Checkout(f.ctx, req, revision)
	if err != nil {
		return render.RemoteTree{}, err
	}
	return render.RemoteTree{Dir: tree.Dir, Revision: tree.Revision, Release: tree.Release}, nil
}
