package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-logr/logr"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
)

// A Mirror fetches each repository once per revision for every reader of
// it, and keeps one read-only tree of each revision that all of them
// render from. A thousand Syncs of one repository and branch cost one
// fetch per commit, not a thousand clones; a new commit fetches only the
// objects the mirror does not have yet.
//
// Repositories are told apart by URL and credentials: two readers share a
// mirror only if they present the same URL and the same credentials, so
// a reader never sees what only another reader's credentials may fetch.
// Mirror directories are named by a digest of both; no credential is
// written to disk.
//
// A Mirror is safe for concurrent use. The zero value is not usable: set
// Dir.
type Mirror struct {
	// Dir holds the mirrors, one directory per repository and
	// credentials, each with its git objects and a tree per revision.
	Dir string
	// Keep is how many trees of one repository are kept while no reader
	// holds them; 0 means 2.
	Keep int
	// AfterFetch, when set, is called after each fetch from a remote, on
	// a goroutine of its own (the agent's CacheLimit.Collect).
	AfterFetch func()
	// Log says when a mirror is cloned again because it went missing or
	// could not be read; the zero value says nothing.
	Log logr.Logger
	// Limits bound the tree of a revision (see WriteTree); the zero value
	// is DefaultTreeLimits. A tree over them, or one WriteTree refuses
	// otherwise, fails Checkout with a *TreeError.
	Limits TreeLimits

	mu    sync.Mutex
	repos map[string]*mirrored

	resolveMu sync.Mutex
	resolving map[string]*refResolution
	// resolved is the last answer of each ref, for ResolveSince: one
	// entry per repository, credentials and ref ever resolved.
	resolved map[string]resolvedRef

	fetches  atomic.Int64
	trees    atomic.Int64
	resolves atomic.Int64

	ociOnce sync.Once
	oci     *oci.Store
}

// MirrorStats count what a Mirror did.
type MirrorStats struct {
	// Fetches are the fetches from remotes.
	Fetches int64
	// Trees are the revisions written out as trees.
	Trees int64
	// Resolves are the ls-remotes that Resolve ran.
	Resolves int64
}

// Stats returns what m did since it was made.
func (m *Mirror) Stats() MirrorStats {
	return MirrorStats{Fetches: m.fetches.Load(), Trees: m.trees.Load(), Resolves: m.resolves.Load()}
}

// A Tree is one revision of a repository, checked out read-only. Release
// it when done reading: the mirror may then remove it once newer
// revisions replace it.
type Tree struct {
	// Dir is the root of the revision's files.
	Dir string
	// Revision is the commit the tree is of.
	Revision string

	release func()
}

// Release tells the mirror the tree is no longer read. It may be called
// more than once.
func (t Tree) Release() {
	if t.release != nil {
		t.release()
	}
}

type mirrored struct {
	dir string
	// fetching is held (a buffered channel of one, so that a waiter can
	// leave when its context ends) across a fetch from the remote: one
	// fetch of a mirror at a time. It is taken before mu, never while
	// holding it.
	fetching chan struct{}
	// used is when a reader last asked for the mirror (Unix nanoseconds).
	used atomic.Int64
	// mu serialises reads of the git storage, which go-git does not make
	// safe for concurrent use, and guards the fields below. It is never
	// held across the network: a fetch writes through a repository of its
	// own (see fetch), so readers of revisions the mirror holds do not
	// wait for it.
	mu   sync.Mutex
	repo *git.Repository
	// objects is repo's cache of decoded objects (nil for a repository
	// just made, which has none yet).
	objects cache.Object
	trees   map[string]*tree
	// order lists the revisions of trees, oldest first.
	order []string
	// root is the root tree of the commit rootOf, the last one
	// PathsDigest read, and dirs its directories read so far: a thousand
	// Syncs of one revision decode each directory once, not a thousand
	// times.
	root   *object.Tree
	rootOf plumbing.Hash
	dirs   map[string]*object.Tree
}

// useRoot makes c's root tree the one that subtree and find read, decoding
// it only when c is not the commit asked about last. r.mu is held.
func (r *mirrored) useRoot(c *object.Commit) error {
	if r.root != nil && r.rootOf == c.Hash {
		return nil
	}
	t, err := c.Tree()
	if err != nil {
		return err
	}
	r.root, r.rootOf, r.dirs = t, c.Hash, map[string]*object.Tree{}
	return nil
}

// subtree returns the directory d ("" is the root) of the root tree. r.mu is
// held.
func (r *mirrored) subtree(d string) (*object.Tree, error) {
	if d == "" {
		return r.root, nil
	}
	if t, ok := r.dirs[d]; ok {
		return t, nil
	}
	parent, name := path.Split(d)
	pt, err := r.subtree(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return nil, err
	}
	t, err := pt.Tree(name)
	if err != nil {
		return nil, err
	}
	r.dirs[d] = t
	return t, nil
}

// find returns the entry at p in the root tree. r.mu is held.
func (r *mirrored) find(p string) (*object.TreeEntry, error) {
	d, name := path.Split(p)
	t, err := r.subtree(strings.TrimSuffix(d, "/"))
	if err != nil {
		return nil, err
	}
	return t.FindEntry(name)
}

type tree struct {
	dir   string
	users int
	done  chan struct{} // closed when the tree is written, or failed
	err   error
}

// Checkout returns the tree of revision of req, fetching it if the mirror
// does not have it. revision is a full commit hash, as Resolve returns.
func (m *Mirror) Checkout(ctx context.Context, req Request, revision string) (Tree, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		return m.checkoutOCI(ctx, req, revision)
	}
	if !plumbing.IsHash(revision) {
		return Tree{}, fmt.Errorf("revision %q is not a full commit hash", revision)
	}
	r, err := m.repo(req)
	if err != nil {
		return Tree{}, err
	}

	for {
		t, release, err := m.tree(ctx, r, req, revision)
		if err != nil && ctx.Err() == nil && errors.Is(err, errOtherReader) {
			// Another reader's write of the tree was cancelled: write it
			// with this reader's context.
			continue
		}
		if err != nil {
			return Tree{}, err
		}
		if err := m.verify(ctx, r, req, revision); err != nil {
			release()
			return Tree{}, err
		}
		return Tree{Dir: t.dir, Revision: revision, release: release}, nil
	}
}

// errOtherReader is wrapped by the error of a tree whose write another
// reader's context ended.
var errOtherReader = errors.New("the reader writing this tree stopped")

// tree returns revision's tree, written by this reader or waited for, and
// the function that releases it.
func (m *Mirror) tree(ctx context.Context, r *mirrored, req Request, revision string) (*tree, func(), error) {
	r.mu.Lock()
	t, ok := r.trees[revision]
	if ok && isClosed(t.done) && t.err == nil && !exists(t.dir) {
		// Written, then removed under the agent with its mirror: write
		// it again. Its readers hold files that are gone already.
		delete(r.trees, revision)
		r.order = deleteString(r.order, revision)
		ok = false
	}
	if !ok {
		t = &tree{dir: filepath.Join(r.dir, "trees", revision), done: make(chan struct{})}
		r.trees[revision] = t
		r.order = append(r.order, revision)
	}
	t.users++
	r.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			r.mu.Lock()
			t.users--
			m.collect(r)
			r.mu.Unlock()
		})
	}
	if !ok {
		err := m.write(ctx, r, req, revision, t.dir)
		if err != nil {
			// Forget the failed tree before anyone can find it done: the
			// next reader writes it again.
			r.mu.Lock()
			if r.trees[revision] == t {
				delete(r.trees, revision)
				r.order = deleteString(r.order, revision)
			}
			r.mu.Unlock()
			if ctx.Err() != nil {
				err = fmt.Errorf("%w: %w", errOtherReader, err)
			}
		}
		t.err = err
		close(t.done)
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if t.err != nil {
		release()
		return nil, nil, t.err
	}
	return t, release, nil
}

// verify checks the signature req.Verify asks for on revision, for this
// reader: trees are shared by readers that verify and readers that do
// not, and by readers that trust different keys.
func (m *Mirror) verify(ctx context.Context, r *mirrored, req Request, revision string) error {
	if req.Verify == nil {
		return nil
	}
	commit, err := m.commit(ctx, r, req, revision)
	if err != nil {
		return err
	}
	if commit == nil {
		return fmt.Errorf("fetch %s: %s moved on since it was resolved at %s: it is fetched again at the next sync", Redact(req.URL), req.Ref, Short(revision))
	}
	if req.Verify.Mode == VerifyTag {
		// The mirror may hold the commit through a branch, not the tag.
		tagged := func() bool { return m.tagPointsAt(r, req.Ref.Tag, revision) }
		r.mu.Lock()
		ok := tagged()
		r.mu.Unlock()
		if !ok {
			if err := m.fetch(ctx, r, req, tagged); err != nil {
				return err
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return req.Verify.verifyRevision(r.repo, req.Ref, revision)
}

// tagPointsAt reports whether the mirror's tag is, or points at,
// revision. r.mu is held.
func (m *Mirror) tagPointsAt(r *mirrored, tag, revision string) bool {
	ref, err := r.repo.Reference(plumbing.NewTagReferenceName(tag), false)
	if err != nil {
		return false
	}
	if ref.Hash().String() == revision {
		return true
	}
	t, err := r.repo.TagObject(ref.Hash())
	return err == nil && t.Target.String() == revision
}

// repo returns the mirror of req's repository and credentials, making it
// if needed.
func (m *Mirror) repo(req Request) (*mirrored, error) {
	key := mirrorKey(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.repos[key]; ok {
		r.used.Store(time.Now().UnixNano())
		return r, nil
	}
	dir := filepath.Join(m.Dir, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Trees of an earlier run are not known to be complete: start over.
	if err := RemoveTree(filepath.Join(dir, "trees")); err != nil {
		return nil, err
	}
	gitDir := filepath.Join(dir, "git")
	repo, objects, err := openMirror(gitDir)
	if err != nil {
		objects = nil
		if repo, err = initMirror(gitDir, req.URL); err != nil {
			return nil, err
		}
	}
	if m.repos == nil {
		m.repos = map[string]*mirrored{}
	}
	r := &mirrored{dir: dir, repo: repo, objects: objects, trees: map[string]*tree{}, fetching: make(chan struct{}, 1)}
	r.used.Store(time.Now().UnixNano())
	m.repos[key] = r
	return r, nil
}

// initMirror makes an empty bare repository at gitDir, removing what was
// there, with the remote origin at url.
func initMirror(gitDir, url string) (*git.Repository, error) {
	if err := os.RemoveAll(gitDir); err != nil {
		return nil, fmt.Errorf("make a mirror of %s: remove %s: %w", Redact(url), gitDir, err)
	}
	repo, err := git.PlainInit(gitDir, true)
	if err != nil {
		return nil, fmt.Errorf("make a mirror of %s: %w", Redact(url), err)
	}
	// The URL may hold a token (https://user:token@host/…): the
	// mirror's config keeps it without, and fetches name it in full.
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{Redact(url)}}); err != nil {
		return nil, fmt.Errorf("make a mirror of %s: %w", Redact(url), err)
	}
	return repo, nil
}

// openForFetch opens the mirror's repository for a fetch; one that is
// gone or cannot be opened (its directory removed under the agent, a
// broken HEAD or config) is made again, empty, and said in the log: the
// fetch then clones it. Its trees went with it or are rewritten as they
// are asked for (see tree).
func (m *Mirror) openForFetch(r *mirrored, req Request) (*git.Repository, cache.Object, error) {
	gitDir := filepath.Join(r.dir, "git")
	repo, objects, err := openMirror(gitDir)
	if err == nil {
		return repo, objects, nil
	}
	m.Log.Info("the mirror is missing or unreadable; cloning it again", "url", Redact(req.URL), "dir", gitDir, "error", err.Error())
	repo, err = initMirror(gitDir, req.URL)
	if err != nil {
		return nil, nil, err
	}
	return repo, nil, nil
}

// mirrorKey names the mirror of a URL read with given credentials.
func mirrorKey(req Request) string {
	h := sha256.New()
	c := req.Credentials
	for _, part := range [][]byte{[]byte(req.URL), c.Identity, c.KnownHosts, []byte(c.Username), []byte(c.Password), []byte(c.Token),
		[]byte(fmt.Sprint(c.InsecureSkipHostKeyCheck))} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// commit returns revision's commit, fetching the ref's tip if the mirror
// lacks it; nil if the tip is not revision any more (the ref moved on
// since revision was resolved: the mirror fetches tips only). r.mu is not
// held; the commit is read under it again by whoever reads its files.
func (m *Mirror) commit(ctx context.Context, r *mirrored, req Request, revision string) (*object.Commit, error) {
	hash := plumbing.NewHash(revision)
	lookup := func() *object.Commit {
		r.mu.Lock()
		defer r.mu.Unlock()
		commit, err := r.repo.CommitObject(hash)
		if err != nil {
			return nil
		}
		return commit
	}
	if commit := lookup(); commit != nil {
		return commit, nil
	}
	has := func() bool {
		_, err := r.repo.CommitObject(hash)
		return err == nil
	}
	if err := m.fetch(ctx, r, req, has); err != nil {
		return nil, err
	}
	return lookup(), nil
}

// PathsDigest returns a digest of what paths hold at revision of req, once
// the signature req.Verify asks for is checked:
// equal digests at two revisions mean the files under paths are the same.
// It fetches revision if the mirror lacks it. It reports false when it
// cannot tell: the revision is not in the mirror's tips, or a symbolic
// link under paths may lead to a file outside them.
func (m *Mirror) PathsDigest(ctx context.Context, req Request, revision string, paths []string) (string, bool, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		return "", false, nil // Checkout verifies
	}
	if !plumbing.IsHash(revision) {
		return "", false, fmt.Errorf("revision %q is not a full commit hash", revision)
	}
	r, err := m.repo(req)
	if err != nil {
		return "", false, err
	}
	commit, err := m.commit(ctx, r, req, revision)
	if err != nil || commit == nil {
		return "", false, err
	}
	if err := m.verify(ctx, r, req, revision); err != nil {
		return "", false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.useRoot(commit); err != nil {
		return "", false, nil
	}
	root := r.root
	if len(paths) == 0 {
		paths = []string{"."}
	}
	h := sha256.New()
	for _, p := range paths {
		p = path.Clean(strings.TrimPrefix(p, "/"))
		fmt.Fprintf(h, "%d:%s=", len(p), p)
		if p == "." {
			if hasSymlink(root) {
				return "", false, nil
			}
			h.Write(root.Hash[:])
			continue
		}
		entry, err := r.find(p)
		if err != nil {
			// Absent, or under a symbolic link to a directory, which
			// the render follows: either way the digest cannot tell.
			return "", false, nil
		}
		switch entry.Mode {
		case filemode.Symlink, filemode.Submodule:
			return "", false, nil
		case filemode.Dir:
			sub, err := r.subtree(p)
			if err != nil || hasSymlink(sub) {
				return "", false, nil
			}
		}
		h.Write(entry.Hash[:])
	}
	return hex.EncodeToString(h.Sum(nil)), true, nil
}

// hasSymlink reports whether t holds a symbolic link at any depth.
func hasSymlink(t *object.Tree) bool {
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		_, entry, err := w.Next()
		if err != nil {
			return err != io.EOF
		}
		if entry.Mode == filemode.Symlink {
			return true
		}
	}
}

// write fetches revision if the mirror lacks it and writes its files into
// dir.
func (m *Mirror) write(ctx context.Context, r *mirrored, req Request, revision, dir string) error {
	commit, err := m.commit(ctx, r, req, revision)
	if err != nil {
		return err
	}
	if commit == nil {
		// Clone the history that holds revision.
		m.fetches.Add(1)
		history := Request{URL: req.URL, Ref: Ref{Commit: revision}, Credentials: req.Credentials, Verify: req.Verify}
		if _, err := checkoutWithin(ctx, history, revision, dir, m.Limits); err != nil {
			return err
		}
		// The clone's .git names the URL, which may hold a token; the
		// tree is read only for its files.
		if err := removeGitDir(dir); err != nil {
			return err
		}
		m.trees.Add(1)
		return nil
	}
	// r.repo is replaced by a fetch when it ends: read its objects under
	// r.mu.
	r.mu.Lock()
	defer r.mu.Unlock()
	tmp := dir + ".tmp"
	if err := RemoveTree(tmp); err != nil {
		return err
	}
	err = WriteTree(r.repo.Storer, commit.Hash, tmp, m.Limits)
	if r.objects != nil {
		// The blobs and delta bases a checkout decoded are not read
		// again before the next revision's: the agent does not keep
		// them (up to mirrorObjectCache per repository, held at a
		// large Sync's first sync while its render and plan are).
		r.objects.Clear()
	}
	if err != nil {
		_ = RemoveTree(tmp)
		return fmt.Errorf("check out %s of %s: %w", Short(revision), Redact(req.URL), err)
	}
	if err := RemoveTree(dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	m.trees.Add(1)
	return nil
}

// fetch brings the ref's tip into the mirror (only the objects it does not
// have yet), or for a commit ref the history of every branch, unless done
// (called under r.mu; nil means never) says a fetch that ended while this
// one waited brought what the caller needs.
//
// One fetch of a mirror runs at a time; a caller waits for its turn until
// ctx ends. The fetch writes through a repository of its own, opened on
// the mirror's directory, without r.mu: readers keep reading the objects
// they have through r.repo, which the fetch replaces once it is done
// (git only adds objects, so what they read stays valid).
func (m *Mirror) fetch(ctx context.Context, r *mirrored, req Request, done func() bool) error {
	return m.fetchDeep(ctx, r, req, done, false)
}

// fetchDeep is fetch; unshallow deepens the mirror to the whole history
// of what it fetches (git fetch --unshallow): without it, a fetch of a
// history stops at the commits the mirror holds without their parents.
func (m *Mirror) fetchDeep(ctx context.Context, r *mirrored, req Request, done func() bool, unshallow bool) error {
	auth, err := req.Credentials.authMethod(req.URL)
	if err != nil {
		return err
	}
	select {
	case r.fetching <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("fetch %s: waiting for another fetch of it: %w", Redact(req.URL), ctx.Err())
	}
	defer func() { <-r.fetching }()
	if done != nil {
		r.mu.Lock()
		ok := done()
		r.mu.Unlock()
		if ok {
			return nil
		}
	}
	repo, objects, err := m.openForFetch(r, req)
	if err != nil {
		return err
	}
	defer func() {
		r.mu.Lock()
		r.repo, r.objects = repo, objects
		r.mu.Unlock()
	}()
	var spec config.RefSpec
	switch {
	case req.Ref.Commit != "":
		spec = "+refs/heads/*:refs/remotes/origin/*"
	case req.Ref.Tag != "":
		spec = config.RefSpec("+refs/tags/" + req.Ref.Tag + ":refs/tags/" + req.Ref.Tag)
	default:
		spec = config.RefSpec("+refs/heads/" + req.Ref.branch() + ":refs/remotes/origin/" + req.Ref.branch())
	}
	opts := &git.FetchOptions{RemoteName: "origin", RemoteURL: req.URL, RefSpecs: []config.RefSpec{spec}, Auth: auth, Tags: git.NoTags, Force: true}
	switch {
	case unshallow:
		opts.Depth = math.MaxInt32
	case req.Ref.Commit == "":
		opts.Depth = 1
	}
	m.fetches.Add(1)
	if m.AfterFetch != nil {
		defer func() { go m.AfterFetch() }()
	}
	err = repo.FetchContext(ctx, opts)
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if errors.Is(err, git.NoMatchingRefSpecError{}) && req.Ref.Tag == "" && req.Ref.Commit == "" {
			return &noBranchError{err: fetchError(req, err)}
		}
		return fetchError(req, err)
	}
	return nil
}

// collect removes trees no reader holds, beyond the newest Keep. r.mu is
// held.
func (m *Mirror) collect(r *mirrored) {
	keep := m.Keep
	if keep <= 0 {
		keep = 2
	}
	var idle []string
	for _, rev := range r.order {
		if t := r.trees[rev]; t.users == 0 && isClosed(t.done) {
			idle = append(idle, rev)
		}
	}
	if len(idle) <= keep {
		return
	}
	for _, rev := range idle[:len(idle)-keep] {
		t := r.trees[rev]
		delete(r.trees, rev)
		r.order = deleteString(r.order, rev)
		_ = RemoveTree(t.dir)
	}
}

// exists reports whether path is there.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func deleteString(list []string, s string) []string {
	return slices.DeleteFunc(list, func(e string) bool { return e == s })
}
