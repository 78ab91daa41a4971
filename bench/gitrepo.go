package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/driftless/driftless/internal/testenv"
)

// gitRepo is a bare repository served over file://, with a working clone
// to commit from. (testenv.GitServer needs a testing.TB; the system git
// is all this needs.)
type gitRepo struct {
	bare, work string
}

// newGitRepo creates an empty bare repository and its clone under dir.
func newGitRepo(dir string) (*gitRepo, error) {
	r := &gitRepo{bare: filepath.Join(dir, "fleet.git"), work: filepath.Join(dir, "work")}
	if err := os.MkdirAll(r.work, 0o755); err != nil {
		return nil, err
	}
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{dir, []string{"init", "--quiet", "--bare", "--initial-branch=main", r.bare}},
		{r.work, []string{"init", "--quiet", "--initial-branch=main"}},
		{r.work, []string{"remote", "add", "origin", r.bare}},
	} {
		if _, err := git(step.dir, step.args...); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// url is the file:// URL the Sync fetches from.
func (r *gitRepo) url() string { return "file://" + r.bare }

// commit writes files (path → content), commits and pushes them to main,
// and returns the new commit.
func (r *gitRepo) commit(message string, files map[string]string) (string, error) {
	for name, content := range files {
		full := filepath.Join(r.work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"add", "--all"},
		{"commit", "--quiet", "--message", message},
		{"push", "--quiet", "origin", "HEAD:refs/heads/main"},
	} {
		if _, err := git(r.work, args...); err != nil {
			return "", err
		}
	}
	return git(r.work, "rev-parse", "HEAD")
}

func git(dir string, args ...string) (string, error) {
	out, err := testenv.GitCommand(dir, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
