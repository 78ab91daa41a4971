package source

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftless/driftless/internal/testenv"
)

// listCache lists dir as listAll does, without the mirrors' git storage,
// which a fetch adds objects to.
func listCache(t *testing.T, dir string) []string {
	t.Helper()
	return slices.DeleteFunc(listAll(t, dir), func(p string) bool {
		parts := strings.Split(filepath.ToSlash(p), "/")
		return len(parts) >= 2 && parts[1] == "git"
	})
}

func TestMirrorRefusesACraftedTreeNamingTheEntryAndWritesNothingOutsideIt(t *testing.T) {
	srv := testenv.NewGitServer(t)
	ctx := context.Background()
	for i, c := range testenv.CraftedTrees(DefaultTreeLimits().MaxDepth) {
		if c.Local {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			repo := srv.NewRepo(t, fmt.Sprintf("fleet%d", i))
			good := repo.Commit(t, "good", map[string]string{"app.yaml": "v: 1\n"})
			req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
			cache := t.TempDir()
			removeTreeAtEnd(t, cache)
			m := &Mirror{Dir: cache, Keep: 10}
			tr, err := m.Checkout(ctx, req, good)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Release()
			before := listCache(t, cache)

			crafted := repo.CommitTree(t, "crafted", func(b *testenv.TreeBuilder) plumbing.Hash { return c.Build(b, "v: 2\n") })
			_, err = m.Checkout(ctx, req, crafted)
			if after := listCache(t, cache); !slices.Equal(before, after) {
				t.Errorf("the crafted commit wrote into the cache:\nbefore %v\nafter  %v", before, after)
			}
			var te *TreeError
			if !errors.As(err, &te) || te.Path != c.Entry || te.Commit != crafted {
				t.Fatalf("checkout of the crafted commit = %v, want a refusal of entry %q of %s", err, c.Entry, Short(crafted))
			}
			if got := readTreeFile(t, tr, "app.yaml"); got != "v: 1\n" {
				t.Errorf("the good tree's app.yaml = %q", got)
			}

			// A commit without the entry checks out.
			fixed := repo.Commit(t, "fixed", map[string]string{"app.yaml": "v: 3\n"})
			ft, err := m.Checkout(ctx, req, fixed)
			if err != nil {
				t.Fatalf("the fixed commit: %v", err)
			}
			defer ft.Release()
			if got := readTreeFile(t, ft, "app.yaml"); got != "v: 3\n" {
				t.Errorf("the fixed tree's app.yaml = %q", got)
			}
		})
	}
}

func TestCheckoutRefusesACraftedTreeOfAPinnedCommit(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "good", map[string]string{"app.yaml": "v: 1\n"})
	c := testenv.CraftedTrees(DefaultTreeLimits().MaxDepth)[0]
	crafted := repo.CommitTree(t, "crafted", func(b *testenv.TreeBuilder) plumbing.Hash { return c.Build(b, "v: 2\n") })
	repo.Commit(t, "later", map[string]string{"app.yaml": "v: 3\n"})
	sandbox := t.TempDir()
	removeTreeAtEnd(t, sandbox)
	before := listAll(t, sandbox)

	_, err := Checkout(context.Background(), Request{URL: repo.FileURL(), Ref: Ref{Commit: crafted}}, crafted, filepath.Join(sandbox, "a", "b", "checkout"))
	var te *TreeError
	if !errors.As(err, &te) || te.Path != c.Entry {
		t.Fatalf("Checkout = %v, want a refusal of entry %q", err, c.Entry)
	}
	after := slices.DeleteFunc(listAll(t, sandbox), func(p string) bool { return p == "a" || p == filepath.Join("a", "b") })
	if !slices.Equal(before, after) {
		t.Errorf("the refused commit wrote: before %v, after %v", before, after)
	}
}
