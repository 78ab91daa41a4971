package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

func TestTheCacheLimitRemovesTheLeastRecentlyUsedMirrorNeverOneInUse(t *testing.T) {
	srv := testenv.NewGitServer(t)
	m := &Mirror{Dir: t.TempDir()}
	ctx := context.Background()
	revs := map[string]string{}
	checkout := func(name string) (Request, Tree) {
		repo := srv.NewRepo(t, name)
		rev := repo.Commit(t, "first", map[string]string{"app.yaml": strings.Repeat(name+"\n", 20000)})
		revs[name] = rev
		req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
		tr, err := m.Checkout(ctx, req, rev)
		if err != nil {
			t.Fatalf("checkout %s: %v", name, err)
		}
		return req, tr
	}
	// Used in this order: held (and still read), old, recent.
	held, heldTree := checkout("held")
	defer heldTree.Release()
	old, oldTree := checkout("old")
	oldTree.Release()
	recent, recentTree := checkout("recent")
	recentTree.Release()
	dirOf := func(req Request) string { return filepath.Join(m.Dir, mirrorKey(req)) }

	// Room for two of the three mirrors.
	limit := &CacheLimit{MaxSize: diskUsage(dirOf(held)) + diskUsage(dirOf(recent)), Mirror: m, Grace: -1}
	got := limit.Collect()
	if got.RemovedMirrors != 1 {
		t.Errorf("removed %d mirrors, want 1: %+v", got.RemovedMirrors, got)
	}
	if _, err := os.Stat(dirOf(old)); !os.IsNotExist(err) {
		t.Errorf("the least recently used mirror is still on disk (%v)", err)
	}
	for name, req := range map[string]Request{"held": held, "recent": recent} {
		if _, err := os.Stat(dirOf(req)); err != nil {
			t.Errorf("the %s mirror was removed: %v", name, err)
		}
	}
	if got := readTreeFile(t, heldTree, "app.yaml"); !strings.HasPrefix(got, "held\n") {
		t.Errorf("the tree in use reads %q", got[:min(len(got), 20)])
	}

	// Nothing fits now but what is in use: it stays, over the limit.
	limit.MaxSize = 1
	limit.Collect()
	if _, err := os.Stat(dirOf(held)); err != nil {
		t.Errorf("a mirror with a tree in use was removed: %v", err)
	}
	if _, err := os.Stat(dirOf(recent)); !os.IsNotExist(err) {
		t.Errorf("an unused mirror over the limit is still on disk (%v)", err)
	}

	// A removed mirror is fetched again when next read.
	tr, err := m.Checkout(ctx, old, revs["old"])
	if err != nil {
		t.Fatalf("checkout after the mirror was removed: %v", err)
	}
	tr.Release()
}
