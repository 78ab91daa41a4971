package source

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultCacheMaxSize is the agent's --cache-max-size: 2 GiB.
const DefaultCacheMaxSize int64 = 2 << 30

// DefaultCacheGrace is how long after its last use a mirror or chart is
// kept whatever the size (CacheLimit.Grace).
const DefaultCacheGrace = time.Minute

// CacheLimit keeps the agent's caches — the git mirrors of a Mirror, the
// OCI artifacts it extracted, and the chart archives under ChartDir —
// under MaxSize bytes on disk, removing what was used least recently
// first: a whole mirror (its git objects and trees), one extracted
// artifact, or one chart archive. It never removes a mirror with a tree
// a reader holds, a fetch under way, or a read of its storage under way,
// nor an artifact a reader holds, nor anything used within Grace. What
// is removed is fetched again when next needed.
//
// Collect runs after fetches (Mirror.AfterFetch, also called after an
// artifact is extracted, and a chart fetcher's),
// one run at a time; a run asked for while one is under way is skipped.
// When everything left is in use, the caches stay over MaxSize until it
// is not.
type CacheLimit struct {
	// MaxSize is the bound in bytes; zero or less means no bound.
	MaxSize int64
	// Mirror is the git mirror whose repositories count.
	Mirror *Mirror
	// ChartDir holds chart archives, <scope>/sha256-<hex>.tgz, last used
	// at their modification time (the chart fetcher touches a chart it
	// serves from the cache).
	ChartDir string
	// Grace keeps what was used this recently; zero is
	// DefaultCacheGrace, negative keeps nothing for it.
	Grace time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex // one run at a time
}

// CacheCollection says what a Collect run found and removed.
type CacheCollection struct {
	// Size is the caches' size before the run, Removed how much of it
	// went.
	Size, Removed int64
	// RemovedMirrors, RemovedArtifacts and RemovedCharts count what
	// went.
	RemovedMirrors, RemovedArtifacts, RemovedCharts int
}

type cacheEntry struct {
	size    int64
	lastUse time.Time
	remove  func() bool // false when the entry turned out in use
	kind    cacheKind
}

type cacheKind int

const (
	cachedChart cacheKind = iota
	cachedMirror
	cachedArtifact
)

// Collect removes least recently used mirrors and charts until the
// caches fit MaxSize, or only what is in use is left. It returns at once,
// with a zero CacheCollection, when another run is under way.
func (c *CacheLimit) Collect() CacheCollection {
	if c == nil || c.MaxSize <= 0 || !c.mu.TryLock() {
		return CacheCollection{}
	}
	defer c.mu.Unlock()
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	grace := c.Grace
	if grace == 0 {
		grace = DefaultCacheGrace
	}
	entries := c.mirrorEntries(now.Add(-grace))
	entries = append(entries, c.artifactEntries(now.Add(-grace))...)
	entries = append(entries, c.chartEntries()...)
	var got CacheCollection
	for _, e := range entries {
		got.Size += e.size
	}
	slices.SortStableFunc(entries, func(a, b cacheEntry) int { return a.lastUse.Compare(b.lastUse) })
	size := got.Size
	for _, e := range entries {
		if size <= c.MaxSize {
			break
		}
		if now.Sub(e.lastUse) < grace || !e.remove() {
			continue
		}
		size -= e.size
		got.Removed += e.size
		switch e.kind {
		case cachedMirror:
			got.RemovedMirrors++
		case cachedArtifact:
			got.RemovedArtifacts++
		default:
			got.RemovedCharts++
		}
	}
	return got
}

// mirrorEntries lists the mirrors; each is removed only if no reader
// asked for it after cutoff, judged when it is removed (a reader may ask
// while the sizes are summed).
func (c *CacheLimit) mirrorEntries(cutoff time.Time) []cacheEntry {
	m := c.Mirror
	if m == nil {
		return nil
	}
	m.mu.Lock()
	repos := make(map[string]*mirrored, len(m.repos))
	for k, r := range m.repos {
		repos[k] = r
	}
	m.mu.Unlock()
	var entries []cacheEntry
	for key, r := range repos {
		entries = append(entries, cacheEntry{
			size:    diskUsage(r.dir),
			lastUse: r.lastUse(),
			remove:  func() bool { return m.forget(key, r, cutoff) },
			kind:    cachedMirror,
		})
	}
	return entries
}

// artifactEntries lists the Mirror's extracted OCI artifacts; each is
// removed only if no reader holds it or opened it after cutoff.
func (c *CacheLimit) artifactEntries(cutoff time.Time) []cacheEntry {
	if c.Mirror == nil {
		return nil
	}
	store := c.Mirror.artifacts()
	store.Sweep(time.Now())
	var entries []cacheEntry
	for _, a := range store.Entries() {
		entries = append(entries, cacheEntry{
			size:    diskUsage(a.Dir),
			lastUse: a.LastUse,
			remove:  func() bool { return store.Remove(a.Dir, cutoff) },
			kind:    cachedArtifact,
		})
	}
	return entries
}

func (c *CacheLimit) chartEntries() []cacheEntry {
	if c.ChartDir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(c.ChartDir, "*", "sha256-*.tgz"))
	var entries []cacheEntry
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			continue
		}
		entries = append(entries, cacheEntry{
			size:    info.Size(),
			lastUse: info.ModTime(),
			remove:  func() bool { return os.Remove(f) == nil },
		})
	}
	return entries
}

// lastUse is when a reader last asked for the mirror.
func (r *mirrored) lastUse() time.Time { return time.Unix(0, r.used.Load()) }

// forget removes the mirror r, known as key, from m and from disk, unless
// a reader asked for it after cutoff (m.repo marks it under m.mu), holds
// one of its trees, a fetch of it is under way or its storage is being
// read.
func (m *Mirror) forget(key string, r *mirrored, cutoff time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.repos[key] != r || r.lastUse().After(cutoff) {
		return false
	}
	select {
	case r.fetching <- struct{}{}:
		defer func() { <-r.fetching }()
	default:
		return false
	}
	if !r.mu.TryLock() {
		return false
	}
	defer r.mu.Unlock()
	for _, t := range r.trees {
		if t.users > 0 || !isClosed(t.done) {
			return false
		}
	}
	delete(m.repos, key)
	return RemoveTree(r.dir) == nil
}

// diskUsage is the size of the regular files under dir.
func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil && !strings.HasSuffix(p, ".lock") {
			n += info.Size()
		}
		return nil
	})
	return n
}
