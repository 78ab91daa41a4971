package source

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// manyFiles is count files of size random bytes each, which do not
// compress or delta against each other.
func manyFiles(count, size int) map[string]string {
	rng := rand.NewChaCha8([32]byte{1})
	files := make(map[string]string, count)
	buf := make([]byte, size)
	for i := range count {
		_, _ = rng.Read(buf)
		files[fmt.Sprintf("apps/app-%03d/data.bin", i)] = string(buf)
	}
	return files
}

// An agent keeps its mirrors open for as long as it runs: what a
// checkout decoded must not stay in memory with them (go-git's default
// cache kept up to 96 MiB of objects per repository; a cache of 4 MiB,
// full after every checkout, was held through a large Sync's first sync,
// at its memory's peak).
func TestAMirrorDoesNotKeepTheRepositoryItCheckedOutInMemory(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "big")
	const files, size = 160, 128 << 10 // 20 MiB of content
	rev := repo.Commit(t, "big", manyFiles(files, size))
	req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
	m := &Mirror{Dir: t.TempDir()}
	// A first checkout of a small repository opens what every mirror
	// holds, so that only the big one's objects count.
	small := srv.NewRepo(t, "small")
	smallRev := small.Commit(t, "small", map[string]string{"app.yaml": "v: 1\n"})
	if tr, err := m.Checkout(context.Background(), Request{URL: small.FileURL(), Ref: Ref{Branch: "main"}}, smallRev); err != nil {
		t.Fatal(err)
	} else {
		tr.Release()
	}

	before := heapInUse()
	tr, err := m.Checkout(context.Background(), req, rev)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTreeFile(t, tr, "apps/app-007/data.bin"); len(got) != size {
		t.Fatalf("apps/app-007/data.bin has %d bytes, want %d", len(got), size)
	}
	tr.Release()
	after := heapInUse()
	runtime.KeepAlive(m)
	const limit = 1 << 20
	if grew := int64(after) - int64(before); grew > limit {
		t.Errorf("after a checkout of %d MiB of files the mirror holds %d KiB more heap, want at most %d KiB", files*size>>20, grew>>10, limit>>10)
	}
}
