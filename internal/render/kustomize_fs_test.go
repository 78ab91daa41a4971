package render

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// testFS returns the filesystem Kustomize gets for a checkout of files,
// with a link named "out" to a directory outside it.
func testFS(t *testing.T, files map[string]string) (*repoFS, string) {
	t.Helper()
	root := checkout(t, files)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte(configMap("stolen")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	rd := &renderer{opts: Options{Root: root}, budgets: DefaultBudgets(), root: r, fsys: r.FS()}
	f, err := rd.repoFS()
	if err != nil {
		t.Fatal(err)
	}
	return f, outside
}

func TestRepoFSReadsTheRepositoryAndNothingElse(t *testing.T) {
	f, outside := testFS(t, map[string]string{"app/kustomization.yaml": "resources: []\n", "base/cm.yaml": configMap("a")})
	reads := []struct {
		name    string
		path    string
		outside bool
	}{
		{"a file", f.abs("base/cm.yaml"), false},
		{"a file through ..", f.abs("app") + "/../base/cm.yaml", false},
		{"a file above the checkout", f.abs("app") + "/../../secret.yaml", true},
		{"an absolute path elsewhere", filepath.Join(outside, "secret.yaml"), true},
		{"a file behind a link out", f.abs("out/secret.yaml"), true},
	}
	for _, tt := range reads {
		t.Run(tt.name, func(t *testing.T) {
			data, err := f.ReadFile(tt.path)
			switch {
			case tt.outside && !errors.Is(err, errOutside):
				t.Errorf("ReadFile = %q, %v; want an error wrapping errOutside", data, err)
			case !tt.outside && err != nil:
				t.Errorf("ReadFile: %v", err)
			}
			if tt.outside && f.Exists(tt.path) {
				t.Errorf("Exists(%s) = true outside the checkout", tt.path)
			}
		})
	}
}

func TestRepoFSConfirmsDirectoriesInsideOnly(t *testing.T) {
	f, _ := testFS(t, map[string]string{"app/kustomization.yaml": "resources: []\n"})
	d, err := filesys.ConfirmDir(f, f.abs("app"))
	if err != nil || d.String() != f.abs("app") {
		t.Errorf("ConfirmDir(app) = %q, %v; want %q", d, err, f.abs("app"))
	}
	if _, err := filesys.ConfirmDir(f, f.abs("out")); !errors.Is(err, errOutside) {
		t.Errorf("ConfirmDir(out) = %v, want an error wrapping errOutside", err)
	}
	if _, err := filesys.ConfirmDir(f, filepath.Dir(f.dir)); !errors.Is(err, errOutside) {
		t.Errorf("ConfirmDir(parent of the checkout) = %v, want an error wrapping errOutside", err)
	}
}

func TestRepoFSIsReadOnly(t *testing.T) {
	f, _ := testFS(t, nil)
	p := f.abs("new.yaml")
	if _, err := f.Create(p); err == nil {
		t.Error("Create succeeded")
	}
	for name, write := range map[string]func() error{
		"WriteFile": func() error { return f.WriteFile(p, []byte("x")) },
		"Mkdir":     func() error { return f.Mkdir(p) },
		"MkdirAll":  func() error { return f.MkdirAll(p) },
		"RemoveAll": func() error { return f.RemoveAll(f.dir) },
	} {
		if err := write(); !errors.Is(err, errReadOnly) {
			t.Errorf("%s = %v, want errReadOnly", name, err)
		}
	}
	if _, err := os.Stat(f.dir); err != nil {
		t.Errorf("checkout gone: %v", err)
	}
}
