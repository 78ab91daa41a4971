package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/testenv"
)

func TestRemoteBasesUseTheSyncsCredentialsOnItsOwnServerOnly(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.HTTPUser, srv.HTTPPassword = "ci", "secret-password-1234"
	fleet := srv.NewRepo(t, "fleet")
	bases := srv.NewRepo(t, "bases")
	rev := bases.Commit(t, "base", map[string]string{"base/kustomization.yaml": "resources: []\n"})

	// A Sync over ssh:// with a deploy key: a base on the same ssh server
	// is fetched with the key.
	remote := &RemoteBases{
		Mirror: &source.Mirror{Dir: t.TempDir()},
		Source: source.Request{URL: fleet.SSHURL(), Credentials: source.Credentials{Identity: srv.DeployKey, KnownHosts: srv.KnownHosts()}},
	}
	fetch := remoteFetcher{ctx: context.Background(), bases: remote, outside: func() {}}

	tree, err := fetch.FetchRemote(render.RemoteBase{Repo: bases.SSHURL(), Ref: "main"})
	if err != nil {
		t.Fatalf("a base on the Sync's ssh server: %v", err)
	}
	defer tree.Release()
	if tree.Revision != rev {
		t.Errorf("fetched %s, want %s", tree.Revision, rev)
	}
	if _, err := os.Stat(filepath.Join(tree.Dir, "base", "kustomization.yaml")); err != nil {
		t.Errorf("the tree lacks the base: %v", err)
	}

	// The same server under another host name is another host: the base
	// is fetched anonymously, which this server refuses.
	elsewhere := strings.Replace(bases.SSHURL(), "127.0.0.1", "localhost", 1)
	if _, err = fetch.FetchRemote(render.RemoteBase{Repo: elsewhere, Ref: "main"}); err == nil {
		t.Fatal("a base on another host was fetched with the Sync's deploy key")
	}

	// A Sync over http:// with a password: the password is never sent in
	// the clear to a base, even on the same server, which refuses the
	// anonymous fetch.
	remote.Source = source.Request{URL: fleet.HTTPURL(), Credentials: source.Credentials{Username: "ci", Password: "secret-password-1234"}}
	_, err = fetch.FetchRemote(render.RemoteBase{Repo: bases.HTTPURL(), Ref: "main"})
	if err == nil {
		t.Fatal("a base over http:// was fetched with the Sync's password")
	}
	if !strings.Contains(err.Error(), "authentication required") || strings.Contains(err.Error(), "secret-password-1234") {
		t.Errorf("an anonymous fetch over http:// refused: error = %v", err)
	}

	// file:// only where the Sync may read the agent's filesystem.
	_, err = fetch.FetchRemote(render.RemoteBase{Repo: bases.FileURL()})
	if err == nil || !strings.Contains(err.Error(), "a file:// repository is a path on the agent, which this Sync may not read") {
		t.Errorf("a file:// base without FileURLs: error = %v", err)
	}
	remote.FileURLs = true
	tree, err = fetch.FetchRemote(render.RemoteBase{Repo: bases.FileURL()})
	if err != nil {
		t.Fatalf("a file:// base with FileURLs: %v", err)
	}
	tree.Release()
}
