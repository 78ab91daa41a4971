package cli

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/testenv"
)

// tempListing lists every path under dir.
func tempListing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// driftless diff (from a URL and from a local clone) and driftless build
// --allow-remote (a remote base at the crafted commit) refuse each crafted
// tree with exit status 2, naming the commit and the entry, and write
// nothing into the temporary directory they check out in.
func TestDiffAndBuildRefuseEveryCraftedTreeNamingTheEntry(t *testing.T) {
	srv := testenv.NewGitServer(t)
	for i, c := range testenv.CraftedTrees(source.DefaultTreeLimits().MaxDepth) {
		if c.Local {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			repo := srv.NewRepo(t, fmt.Sprintf("fleet%d", i))
			good := repo.Commit(t, "good", map[string]string{"app.yaml": diffConfigMap("shop", "web", "v1")})
			crafted := repo.CommitTree(t, "crafted", func(b *testenv.TreeBuilder) plumbing.Hash {
				return c.Build(b, diffConfigMap("shop", "web", "v2"))
			})
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			t.Cleanup(func() { _ = source.RemoveTree(tmp) })
			app := writeFiles(t, map[string]string{"app/kustomization.yaml": "resources:\n- " + repo.FileURL() + "//.?ref=main\n"})
			before := tempListing(t, tmp)

			wants := []string{"commit " + source.Short(crafted), `entry "` + c.Entry + `"`, "push a commit without it"}
			for name, run := range map[string]func() diffResult{
				"diff --repo URL":      func() diffResult { return runDiffCommand(t, "--repo", repo.FileURL(), "--from", good, "--to", crafted) },
				"diff --repo local":    func() diffResult { return runDiffCommand(t, "--repo", repo.Work, "--from", good, "--to", "main") },
				"build --allow-remote": func() diffResult { return runBuildCommand(t, "--repo", app, "--allow-remote") },
			} {
				r := run().expect(t, 2)
				for _, w := range wants {
					if !strings.Contains(r.errOut, w) {
						t.Errorf("%s: stderr lacks %q:\n%s", name, w, r.errOut)
					}
				}
				if after := tempListing(t, tmp); !slices.Equal(before, after) {
					t.Errorf("%s wrote into its temporary directory:\nbefore %v\nafter  %v", name, before, after)
				}
			}
		})
	}
}
