package controller

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/testenv"
)

// cacheListing lists the agent's cache without the mirrors' git storage,
// which a fetch adds objects to.
func cacheListing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if parts := strings.Split(filepath.ToSlash(rel), "/"); len(parts) >= 3 && parts[0] == "mirrors" && parts[2] == "git" {
			return nil
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A tenant's Sync pointed at a commit whose tree holds a symbolic link and
// then a directory of the same name (the directory's file would be
// written through the link, into the agent's cache) is refused with
// FetchFailed naming the commit and the entry; nothing is written outside
// the tree, the cluster keeps the last good revision, and a commit without
// the entry is applied.
func TestASyncOfACraftedTreeFailsToFetchNamingTheEntryAndKeepsItsObjects(t *testing.T) {
	h := tenantHarness(t, Tenancy{AgentNamespace: agentNamespace, FileURLs: true})
	t.Cleanup(func() { _ = source.RemoveTree(h.r.CacheDir) })
	deployer(t, h.ns)
	good := h.repo.Commit(t, "good", map[string]string{"app.yaml": configMapIn(h.ns, "app", "v1")})
	h.createSync("team", func(s *v1alpha1.Sync) { s.Spec.ServiceAccountName = "deployer" })
	s := h.reconcile("team")
	h.expectReady(s)
	inventory := listed(t, s)
	before := cacheListing(t, h.r.CacheDir)

	planted := testenv.CraftedTrees(source.DefaultTreeLimits().MaxDepth)[0]
	crafted := h.repo.CommitTree(t, "crafted", func(b *testenv.TreeBuilder) plumbing.Hash {
		return planted.Build(b, configMapIn(h.ns, "app", "v2"))
	})
	s = h.reconcile("team")
	h.expectFailed(s, v1alpha1.ReasonFetchFailed, "commit "+source.Short(crafted), `entry "a" is named twice in its directory`, "push a commit without it")
	eventsFor(t, h.ns, "team", `entry "a"`)
	if got := h.configValue("app"); got != "v1" {
		t.Errorf("ConfigMap app = %q after the refused commit, want v1", got)
	}
	if s.Status.LastAppliedRevision != good {
		t.Errorf("lastAppliedRevision = %s, want the good %s", s.Status.LastAppliedRevision, good)
	}
	if got := listed(t, s); !slices.Equal(got, inventory) {
		t.Errorf("inventory %v, want it kept as %v", got, inventory)
	}
	if after := cacheListing(t, h.r.CacheDir); !slices.Equal(before, after) {
		t.Errorf("the refused commit wrote into the agent's cache:\nbefore %v\nafter  %v", before, after)
	}

	fixed := h.repo.Commit(t, "fixed", map[string]string{"app.yaml": configMapIn(h.ns, "app", "v3")})
	s = h.reconcile("team")
	h.expectReady(s)
	if got := h.configValue("app"); got != "v3" || s.Status.LastAppliedRevision != fixed {
		t.Errorf("the fixed commit: app = %q at %s, want v3 at %s", got, s.Status.LastAppliedRevision, fixed)
	}
}
