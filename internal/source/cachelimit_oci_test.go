package source

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

func TestTheCacheLimitCountsExtractedArtifactsAndNeverRemovesOneInUse(t *testing.T) {
	reg := testenv.NewOCIRegistry(t, "", "")
	m := &Mirror{Dir: t.TempDir()}
	collected := 0
	m.AfterFetch = func() { collected++ }
	ctx := context.Background()
	checkout := func(name string) (Request, string, Tree) {
		t.Helper()
		dir := testenv.WriteFiles(t, map[string]string{"app.yaml": strings.Repeat(name+"\n", 20000)})
		_, digest, err := oci.Push(ctx, oci.PushOptions{URL: reg.URL(name) + ":1.0.0", Dir: dir, Source: "https://example.com/fleet.git", Revision: "1.0.0", Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		req := Request{URL: reg.URL(name), OCI: &oci.Request{URL: reg.URL(name), Digest: digest, Insecure: true}}
		tr, err := m.Checkout(ctx, req, digest)
		if err != nil {
			t.Fatalf("checkout %s: %v", name, err)
		}
		return req, digest, tr
	}
	// Used in this order: held (and still read), old, recent.
	_, _, heldTree := checkout("held")
	defer heldTree.Release()
	old, oldDigest, oldTree := checkout("old")
	oldTree.Release()
	_, _, recentTree := checkout("recent")
	recentTree.Release()
	if collected != 3 {
		t.Errorf("the cache bound ran after %d of 3 extractions", collected)
	}

	// Room for two of the three artifacts: the git mirrors are empty.
	limit := &CacheLimit{MaxSize: diskUsage(heldTree.Dir) + diskUsage(recentTree.Dir), Mirror: m, Grace: -1}
	got := limit.Collect()
	if got.RemovedArtifacts != 1 || got.Size < 3*20000*5 {
		t.Errorf("removed %d artifacts of a cache of %d bytes, want 1 of at least %d: %+v", got.RemovedArtifacts, got.Size, 3*20000*5, got)
	}
	if _, err := os.Stat(oldTree.Dir); !os.IsNotExist(err) {
		t.Errorf("the least recently used artifact is still on disk (%v)", err)
	}
	if _, err := os.Stat(recentTree.Dir); err != nil {
		t.Errorf("the recently used artifact was removed: %v", err)
	}

	// Nothing fits now but what is in use: it stays, over the limit.
	limit.MaxSize = 1
	limit.Collect()
	if got := readTreeFile(t, heldTree, "app.yaml"); !strings.HasPrefix(got, "held\n") {
		t.Errorf("the artifact in use reads %q", got[:min(len(got), 20)])
	}
	if _, err := os.Stat(recentTree.Dir); !os.IsNotExist(err) {
		t.Errorf("an unused artifact over the limit is still on disk (%v)", err)
	}

	// A removed artifact is pulled again when next read.
	tr, err := m.Checkout(ctx, old, oldDigest)
	if err != nil {
		t.Fatalf("checkout after the artifact was removed: %v", err)
	}
	defer tr.Release()
	if got := readTreeFile(t, tr, "app.yaml"); !strings.HasPrefix(got, "old\n") {
		t.Errorf("the artifact pulled again reads %q", got[:min(len(got), 20)])
	}
}
