package source

import (
	"errors"
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

// Names and link targets a fuzzed tree shape picks from: mostly good ones,
// so that trees get written, and the ones WriteTree must refuse.
var (
	fuzzNames   = []string{"a", "b", "c", "a", ".git", "..", "", "x/y", ".", "b"}
	fuzzTargets = []string{"a", "b", "a/b", "../x", "..", "/etc", "a/..", "b/c/..", "c/../..", ".", "b/../a", "../a"}
)

// shapeTree builds a tree from shape: each byte takes the next entry's
// kind (file, directory, link or end of directory) and the next its name
// or target.
func shapeTree(b *testenv.TreeBuilder, shape []byte, depth int) (plumbing.Hash, []byte) {
	var entries []object.TreeEntry
	for len(shape) >= 2 {
		op, arg := shape[0], int(shape[1])
		shape = shape[2:]
		name := fuzzNames[arg%len(fuzzNames)]
		switch op % 4 {
		case 0:
			entries = append(entries, b.File(name, "f"))
		case 1:
			if depth >= 6 {
				continue
			}
			var h plumbing.Hash
			h, shape = shapeTree(b, shape, depth+1)
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		case 2:
			entries = append(entries, b.Link(name, fuzzTargets[(arg/len(fuzzNames))%len(fuzzTargets)]))
		case 3:
			return b.Tree(entries...), shape
		}
	}
	return b.Tree(entries...), shape
}

// FuzzWriteTree checks, for any tree shape, that WriteTree either refuses
// it with a *TreeError and writes nothing, or writes only inside its
// directory, with every link resolving inside it (or nowhere).
func FuzzWriteTree(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 0, 1, 1, 0, 2, 3, 0},             // a, b/ with c
		{2, 36, 1, 0, 0, 0, 3, 0},            // link a → ../x, then directory a
		{1, 0, 0, 1, 3, 0, 2, 40},            // directory a, then link a
		{2, 10, 2, 1, 1, 2, 2, 12},           // links through each other
		{0, 4, 1, 5, 0, 0, 3, 0, 0, 6, 0, 7}, // .git, .., "", x/y
		{1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 2, 52},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, shape []byte) {
		if len(shape) > 400 {
			return
		}
		s := memory.NewStorage()
		b := testenv.NewTreeBuilder(t, s)
		tree, _ := shapeTree(b, shape, 0)
		commit := b.Commit(tree, plumbing.ZeroHash, "fuzz")
		sandbox := t.TempDir()
		defer RemoveTree(sandbox)
		dir := filepath.Join(sandbox, "cache", "tree")
		if err := os.Mkdir(filepath.Dir(dir), 0o700); err != nil {
			t.Fatal(err)
		}
		before := listAll(t, sandbox)

		err := WriteTree(s, commit, dir, TreeLimits{MaxDepth: 5})
		if err != nil {
			var te *TreeError
			if !errors.As(err, &te) {
				t.Fatalf("WriteTree = %v, want a *TreeError", err)
			}
			if after := listAll(t, sandbox); !slices.Equal(before, after) {
				t.Fatalf("a refused tree wrote: before %v, after %v", before, after)
			}
			return
		}
		for _, p := range listAll(t, sandbox) {
			if p != "." && p != "cache" && p != "cache/tree" && !strings.HasPrefix(p, "cache/tree/") {
				t.Fatalf("written outside the tree: %s", p)
			}
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range listAll(t, dir) {
			name, _, isLink := strings.Cut(p, " -> ")
			if !isLink {
				continue
			}
			resolved, err := filepath.EvalSymlinks(filepath.Join(dir, name))
			if err != nil {
				continue // dangling, or through a file: leads nowhere
			}
			if rel, err := filepath.Rel(real, resolved); err != nil || !filepath.IsLocal(rel) && rel != "." {
				t.Fatalf("link %s resolves to %s, outside the tree", p, resolved)
			}
		}
	})
}
