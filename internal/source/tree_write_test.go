package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/driftless/driftless/internal/testenv"
)

// listAll lists every path under dir (relative, with "/" after links'
// names and their targets), so that a listing before and after a write
// shows anything written anywhere under it.
func listAll(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			rel += " -> " + target
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// removeTreeAtEnd removes dir with RemoveTree before t.TempDir's clean-up,
// which cannot remove a read-only tree unless run as root.
func removeTreeAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() { _ = RemoveTree(dir) })
}

func TestWriteTreeRefusesEveryCraftedTreeNamingTheEntryAndWritesNothing(t *testing.T) {
	for _, c := range testenv.CraftedTrees(DefaultTreeLimits().MaxDepth) {
		t.Run(c.Name, func(t *testing.T) {
			s := memory.NewStorage()
			b := testenv.NewTreeBuilder(t, s)
			commit := b.Commit(c.Build(b, "kind: ConfigMap\n"), plumbing.ZeroHash, "crafted")
			sandbox := t.TempDir()
			removeTreeAtEnd(t, sandbox)
			dir := filepath.Join(sandbox, "cache", "key", "trees", commit.String())
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				t.Fatal(err)
			}
			before := listAll(t, sandbox)

			err := WriteTree(s, commit, dir, TreeLimits{})
			var te *TreeError
			if !errors.As(err, &te) {
				t.Fatalf("WriteTree = %v, want a *TreeError", err)
			}
			if te.Path != c.Entry || te.Commit != commit.String() {
				t.Errorf("refusal names entry %q of commit %s, want %q of %s", te.Path, te.Commit, c.Entry, commit)
			}
			if !strings.Contains(err.Error(), Short(commit.String())) || !strings.Contains(err.Error(), "push a commit without it") {
				t.Errorf("error %q does not name the commit and what to do", err)
			}
			if after := listAll(t, sandbox); !slices.Equal(before, after) {
				t.Errorf("a refused tree wrote: before %v, after %v", before, after)
			}
		})
	}
}

func TestWriteTreeWritesFilesDirectoriesAndLinksReadOnly(t *testing.T) {
	s := memory.NewStorage()
	b := testenv.NewTreeBuilder(t, s)
	tree := b.Tree(
		b.File("app.yaml", "kind: ConfigMap\n"),
		b.Dir("apps",
			b.Dir("web", b.File("deploy.yaml", "kind: Deployment\n")),
			b.Link("up", ".."),
			object.TreeEntry{Name: "run.sh", Mode: filemode.Executable, Hash: b.Blob("#!/bin/sh\n")},
		),
		b.Link("current", "apps/web"),
		b.Link("chain", "current/deploy.yaml"),
		b.Link("dangling", "nowhere/at/all"),
		object.TreeEntry{Name: "vendored", Mode: filemode.Submodule, Hash: plumbing.NewHash("1111111111111111111111111111111111111111")},
	)
	commit := b.Commit(tree, plumbing.ZeroHash, "good")
	dir := filepath.Join(t.TempDir(), "tree")
	removeTreeAtEnd(t, dir)
	if err := WriteTree(s, commit, dir, TreeLimits{}); err != nil {
		t.Fatal(err)
	}
	want := []string{".", "app.yaml", "apps", "apps/run.sh", "apps/up -> ..", "apps/web", "apps/web/deploy.yaml",
		"chain -> current/deploy.yaml", "current -> apps/web", "dangling -> nowhere/at/all"}
	if got := listAll(t, dir); !slices.Equal(got, want) {
		t.Errorf("tree holds %v, want %v", got, want)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "chain")); err != nil || string(data) != "kind: Deployment\n" {
		t.Errorf("chain reads %q, %v", data, err)
	}
	for name, mode := range map[string]fs.FileMode{".": 0o555 | fs.ModeDir, "apps/web": 0o555 | fs.ModeDir, "app.yaml": 0o444, "apps/run.sh": 0o555} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode(), mode)
		}
	}
	if err := RemoveTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("RemoveTree left %s: %v", dir, err)
	}
}

func TestWriteTreeRefusesTreesOverItsLimits(t *testing.T) {
	s := memory.NewStorage()
	b := testenv.NewTreeBuilder(t, s)
	commit := b.Commit(b.Tree(
		b.File("a.yaml", strings.Repeat("a", 600)),
		b.Dir("b", b.Dir("c", b.File("d.yaml", strings.Repeat("d", 600)))),
	), plumbing.ZeroHash, "big")
	for _, c := range []struct {
		name   string
		limits TreeLimits
		entry  string
	}{
		{"a file larger than a file may be", TreeLimits{MaxFileSize: 500}, "a.yaml"},
		{"files larger than a tree may hold", TreeLimits{MaxTotalSize: 1000}, "b/c/d.yaml"},
		{"more entries than a tree may hold", TreeLimits{MaxEntries: 3}, "b/c/d.yaml"},
		{"a path deeper than a tree may go", TreeLimits{MaxDepth: 2}, "b/c/d.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var te *TreeError
			if err := WriteTree(s, commit, filepath.Join(t.TempDir(), "tree"), c.limits); !errors.As(err, &te) || te.Path != c.entry {
				t.Errorf("WriteTree = %v, want a refusal of %s", err, c.entry)
			}
		})
	}
}
