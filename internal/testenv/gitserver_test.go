package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func sshAuth(t *testing.T, srv *GitServer, knownHostsFile []byte) transport.AuthMethod {
	t.Helper()
	auth, err := gitssh.NewPublicKeys("git", srv.DeployKey, "")
	if err != nil {
		t.Fatalf("parse deploy key: %v", err)
	}
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, knownHostsFile, 0o600); err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(path)
	if err != nil {
		t.Fatal(err)
	}
	auth.HostKeyCallback = cb
	return auth
}

func TestGitServerClonesOverSSHWithVerifiedHostKey(t *testing.T) {
	srv := NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	head := repo.Commit(t, "add app", map[string]string{"workloads/app.yaml": "kind: ConfigMap\n"})

	dir := t.TempDir()
	r, err := git.PlainClone(dir, false, &git.CloneOptions{URL: repo.SSHURL(), Auth: sshAuth(t, srv, srv.KnownHosts())})
	if err != nil {
		t.Fatalf("clone over ssh: %v", err)
	}
	ref, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	if ref.Hash().String() != head {
		t.Errorf("cloned HEAD = %s, want %s", ref.Hash(), head)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "workloads/app.yaml")); err != nil || string(data) != "kind: ConfigMap\n" {
		t.Errorf("workloads/app.yaml = %q, %v", data, err)
	}
}

func TestGitServerRefusesWrongHostKey(t *testing.T) {
	srv := NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "init", map[string]string{"a.yaml": "a: 1\n"})

	impostor := NewGitServer(t) // another server's key under this server's address
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.SSHAddr())}, impostor.HostKey) + "\n"

	_, err := git.PlainClone(t.TempDir(), false, &git.CloneOptions{URL: repo.SSHURL(), Auth: sshAuth(t, srv, []byte(line))})
	if err == nil {
		t.Fatal("clone with a wrong host key in known_hosts succeeded, want it refused")
	}
	var keyErr *knownhosts.KeyError
	if !errors.As(err, &keyErr) && !strings.Contains(err.Error(), "key mismatch") {
		t.Errorf("clone error = %v, want a host key mismatch", err)
	}
}

func TestGitServerRefusesUnknownDeployKey(t *testing.T) {
	srv := NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "init", map[string]string{"a.yaml": "a: 1\n"})

	other := NewGitServer(t) // its deploy key is not authorized here
	auth, err := gitssh.NewPublicKeys("git", other.DeployKey, "")
	if err != nil {
		t.Fatal(err)
	}
	auth.HostKeyCallback = ssh.FixedHostKey(srv.HostKey)
	if _, err := git.PlainClone(t.TempDir(), false, &git.CloneOptions{URL: repo.SSHURL(), Auth: auth}); err == nil {
		t.Fatal("clone with an unauthorized deploy key succeeded")
	}
}

func TestGitServerClonesOverHTTPWithBasicAuth(t *testing.T) {
	srv := NewGitServer(t)
	srv.HTTPUser, srv.HTTPPassword = "ci", "s3cret-token"
	repo := srv.NewRepo(t, "fleet")
	head := repo.Commit(t, "init", map[string]string{"a.yaml": "a: 1\n"})

	if _, err := git.PlainClone(t.TempDir(), false, &git.CloneOptions{URL: repo.HTTPURL()}); err == nil {
		t.Error("clone over http without credentials succeeded, want 401")
	}
	r, err := git.PlainClone(t.TempDir(), false, &git.CloneOptions{
		URL:  repo.HTTPURL(),
		Auth: &githttp.BasicAuth{Username: "ci", Password: "s3cret-token"},
	})
	if err != nil {
		t.Fatalf("clone over http: %v", err)
	}
	ref, _ := r.Head()
	if ref.Hash().String() != head {
		t.Errorf("cloned HEAD = %s, want %s", ref.Hash(), head)
	}
}

func TestGitServerServesFileURLAndBranches(t *testing.T) {
	srv := NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "on main", map[string]string{"a.yaml": "a: 1\n"})
	repo.Checkout(t, "staging")
	staging := repo.Commit(t, "on staging", map[string]string{"a.yaml": "a: 2\n"})

	r, err := git.PlainClone(t.TempDir(), false, &git.CloneOptions{URL: repo.FileURL(), ReferenceName: "refs/heads/staging", SingleBranch: true})
	if err != nil {
		t.Fatalf("clone file://: %v", err)
	}
	ref, _ := r.Head()
	if ref.Hash().String() != staging {
		t.Errorf("staging HEAD = %s, want %s", ref.Hash(), staging)
	}
}
