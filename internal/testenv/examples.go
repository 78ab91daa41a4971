package testenv

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Example returns the directory of a public example repository that
// hack/examples/go.mod pins (module path mod, such as
// github.com/stefanprodan/podinfo): a verified, read-only copy in the Go
// module cache. It makes no network request: a module that is not in the
// cache fails the test with a message to run `make examples`.
func Example(t testing.TB, mod string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("example %s: %v", mod, err)
	}
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = filepath.Join(root, "hack", "examples")
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var got struct{ Dir, Version, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || runErr != nil || got.Error != "" || got.Dir == "" {
		t.Fatalf("example repository %s is not in the Go module cache (%s%s); run `make examples` first, which downloads it as hack/examples/go.mod pins it",
			mod, strings.TrimSpace(got.Error), strings.TrimSpace(stderr.String()))
	}
	return got.Dir
}

// ExampleFiles reads every file under dir, a directory Example returned,
// as Repo.Commit takes them: slash-separated path → content.
func ExampleFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("read example %s: %v", dir, err)
	}
	return files
}
