package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo is a bare repository on a GitServer with a working clone that tests
// commit to.
type Repo struct {
	Name string
	// Bare is the path of the bare repository.
	Bare string
	// Work is the working clone used by Commit.
	Work string
	srv  *GitServer
}

// NewRepo creates an empty bare repository NAME.git whose default branch
// is main.
func (s *GitServer) NewRepo(t testing.TB, name string) *Repo {
	t.Helper()
	r := &Repo{Name: name, Bare: filepath.Join(s.Root, name+".git"), Work: t.TempDir(), srv: s}
	r.git(t, s.Root, "init", "--quiet", "--bare", "--initial-branch=main", r.Bare)
	r.git(t, r.Work, "init", "--quiet", "--initial-branch=main")
	r.git(t, r.Work, "remote", "add", "origin", r.Bare)
	return r
}

// SSHURL is the repository's ssh:// URL (user git).
func (r *Repo) SSHURL() string { return fmt.Sprintf("ssh://git@%s/%s.git", r.srv.sshAddr, r.Name) }

// HTTPURL is the repository's smart-HTTP URL.
func (r *Repo) HTTPURL() string { return fmt.Sprintf("%s/%s.git", r.srv.httpServer.URL, r.Name) }

// UploadPacks is how many ls-remotes, fetches and clones the repository
// has served over SSH and HTTP (see GitServer.UploadPacks).
func (r *Repo) UploadPacks() int { return r.srv.UploadPacks(r.Name) }

// FileURL is the repository's file:// URL.
func (r *Repo) FileURL() string { return "file://" + r.Bare }

// Commit writes files (path → content; an empty content deletes the path)
// into the working clone, commits them on the current branch, pushes the
// branch and returns the new commit's hash.
func (r *Repo) Commit(t testing.TB, message string, files map[string]string) string {
	t.Helper()
	return r.commit(t, nil, message, files)
}

// commit is Commit, signed with signing when it is not nil.
func (r *Repo) commit(t testing.TB, signing *SigningKey, message string, files map[string]string) string {
	t.Helper()
	for path, content := range files {
		full := filepath.Join(r.Work, filepath.FromSlash(path))
		if content == "" {
			if err := os.RemoveAll(full); err != nil {
				t.Fatalf("remove %s: %v", path, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git(t, r.Work, "add", "--all")
	if signing != nil {
		r.gitSigned(t, signing, "commit", "--quiet", "--allow-empty", "-S", "--message", message)
	} else {
		r.git(t, r.Work, "commit", "--quiet", "--allow-empty", "--message", message)
	}
	branch := r.git(t, r.Work, "rev-parse", "--abbrev-ref", "HEAD")
	r.git(t, r.Work, "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	return r.git(t, r.Work, "rev-parse", "HEAD")
}

// ForcePush resets the current branch of the working clone to revision
// and force-pushes it: the branch moves back, as after `git push --force`.
func (r *Repo) ForcePush(t testing.TB, revision string) {
	t.Helper()
	r.git(t, r.Work, "reset", "--quiet", "--hard", revision)
	branch := r.git(t, r.Work, "rev-parse", "--abbrev-ref", "HEAD")
	r.git(t, r.Work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+branch)
}

// Tag creates a lightweight tag at HEAD and pushes it.
func (r *Repo) Tag(t testing.TB, name string) {
	t.Helper()
	r.git(t, r.Work, "tag", name)
	r.git(t, r.Work, "push", "--quiet", "origin", "refs/tags/"+name)
}

// Checkout switches the working clone to branch, creating it at HEAD when new.
func (r *Repo) Checkout(t testing.TB, branch string) {
	t.Helper()
	r.git(t, r.Work, "checkout", "--quiet", "-B", branch)
}

func (r *Repo) git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := GitCommand(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// GitCommand returns a git command run in dir with a fixed identity and
// no user or system configuration, so results do not depend on the machine.
func GitCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=driftless test", "GIT_AUTHOR_EMAIL=test@driftless.dev",
		"GIT_COMMITTER_NAME=driftless test", "GIT_COMMITTER_EMAIL=test@driftless.dev",
	)
	return cmd
}
