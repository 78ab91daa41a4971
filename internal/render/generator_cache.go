package render

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
)

// A GeneratorCache keeps what the kustomizations of one Sync's last render
// built, each with a digest of everything the build could read: the
// directory of every kustomization in its graph (bases, components,
// overlays, whole) and every file and directory they name. A render of a
// new revision builds again only the kustomizations whose inputs changed,
// so a commit to one app of a repository of a hundred overlays runs
// Kustomize once.
//
// Builds that read an encrypted file are not kept: their keys could have
// changed. Give each Sync its own GeneratorCache (Options.Cache); renders
// that share one must not run at the same time.
type GeneratorCache struct {
	mu      sync.Mutex
	entries map[string]*cached // by kustomization file
	used    map[string]bool    // entries the render in progress used

	built, reused atomic.Int64
}

// NewGeneratorCache returns an empty cache.
func NewGeneratorCache() *GeneratorCache {
	return &GeneratorCache{entries: map[string]*cached{}}
}

// Builds returns how many kustomizations were built and how many were
// reused from the cache, over every render that used c.
func (c *GeneratorCache) Builds() (built, reused int64) {
	if c == nil {
		return 0, 0
	}
	return c.built.Load(), c.reused.Load()
}

type cached struct {
	options string
	digest  [sha256.Size]byte
	objects []pending // before settling, as the build made them
	used    usage     // what the build used of the budgets
}

func (c *GeneratorCache) lookup(file, options string, digest [sha256.Size]byte) (*cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used == nil {
		c.used = map[string]bool{}
	}
	c.used[file] = true
	e, ok := c.entries[file]
	if !ok || e.options != options || e.digest != digest {
		return nil, false
	}
	return e, true
}

func (c *GeneratorCache) store(file string, e *cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[file] = e
}

// finish forgets the kustomizations the render did not reach, so that the
// cache holds no more than the last render.
func (c *GeneratorCache) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for file := range c.entries {
		if !c.used[file] {
			delete(c.entries, file)
		}
	}
	c.used = nil
}

// readsBeyondPaths tells Options.ReadsBeyondPaths that a generator that
// may read files outside Paths runs.
func (r *renderer) readsBeyondPaths() {
	if r.opts.ReadsBeyondPaths != nil {
		r.opts.ReadsBeyondPaths()
	}
}

// cacheOptions is what, besides the files, a kustomization's build
// depends on.
func (r *renderer) cacheOptions() string {
	return fmt.Sprintf("%+v", r.opts.Kustomize)
}

// digestInputs hashes the inputs of a build: each file's content, and each
// directory's names and contents, at any depth (.git left out). Reads go
// through the render's root, so links are followed only inside the
// checkout, and are not counted against the budgets: they read what the
// build read, or less.
func (r *renderer) digestInputs(inputs []string) ([sha256.Size]byte, error) {
	inputs = slices.Clone(inputs)
	slices.Sort(inputs)
	h := sha256.New()
	file := func(name string) error {
		f, err := r.fsys.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "file %q\n", name)
		_, err = io.Copy(h, io.LimitReader(f, maxFileSize+1))
		return err
	}
	for _, name := range slices.Compact(inputs) {
		info, err := fs.Stat(r.fsys, name)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(h, "absent %q\n", name)
			continue
		}
		if err != nil {
			return [sha256.Size]byte{}, err
		}
		if !info.IsDir() {
			if err := file(name); err != nil {
				return [sha256.Size]byte{}, err
			}
			continue
		}
		err = fs.WalkDir(r.fsys, name, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == ".git":
				return fs.SkipDir
			case d.IsDir():
				fmt.Fprintf(h, "dir %q\n", p)
				return nil
			}
			return file(p)
		})
		if err != nil {
			return [sha256.Size]byte{}, err
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, nil
}

// reuse adds the objects a cached build made (their JSON, which settling
// does not change), and counts what the build used against the budgets.
func (r *renderer) reuse(k kustomization, e *cached) {
	r.used.files += e.used.files
	r.used.documents += e.used.documents
	r.used.bytes += e.used.bytes
	r.used.decoded += e.used.decoded
	for _, o := range e.objects {
		if !r.countObject(o.origin, o.ref) {
			return
		}
		r.pending = append(r.pending, o)
	}
	switch {
	case r.used.decoded > r.budgets.MaxBytes:
		r.stop(Origin{Path: k.file}, "", overBudget(fmt.Sprintf("the documents decoded hold %s, over the limit of %s",
			formatBytes(r.used.decoded), formatBytes(r.budgets.MaxBytes)), "--render-max-bytes"))
	case r.used.files > r.budgets.MaxFiles:
		r.stop(Origin{Path: k.file}, "", r.filesError())
	case r.used.bytes > r.budgets.MaxBytes:
		r.stop(Origin{Path: k.file}, "", overBudget(fmt.Sprintf("the files read hold %s, over the limit of %s",
			formatBytes(r.used.bytes), formatBytes(r.budgets.MaxBytes)), "--render-max-bytes"))
	}
}

// minus is what u used beyond before.
func (u usage) minus(before usage) usage {
	return usage{
		files:     u.files - before.files,
		documents: u.documents - before.documents,
		objects:   u.objects - before.objects,
		bytes:     u.bytes - before.bytes,
		decoded:   u.decoded - before.decoded,
	}
}
