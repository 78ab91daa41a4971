package source

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// TreeLimits bound the tree of one commit that WriteTree writes. A field
// that is zero or negative takes its value from DefaultTreeLimits.
type TreeLimits struct {
	// MaxDepth bounds how many names deep an entry is: "a/b/c.yaml" is 3.
	MaxDepth int
	// MaxEntries bounds the entries of the tree at every depth: files,
	// directories, symbolic links and submodules.
	MaxEntries int
	// MaxFileSize bounds the size of one file, as its git object declares
	// it: a larger file is refused before any of it is read.
	MaxFileSize int64
	// MaxTotalSize bounds the sizes of all files together.
	MaxTotalSize int64
}

// DefaultTreeLimits returns the limits of a checkout that sets none: 64
// names deep, 200,000 entries, 100 MiB a file (GitHub refuses larger
// files) and 1 GiB in all.
func DefaultTreeLimits() TreeLimits {
	return TreeLimits{MaxDepth: 64, MaxEntries: 200_000, MaxFileSize: 100 << 20, MaxTotalSize: 1 << 30}
}

func (l TreeLimits) withDefaults() TreeLimits {
	d := DefaultTreeLimits()
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = d.MaxFileSize
	}
	if l.MaxTotalSize <= 0 {
		l.MaxTotalSize = d.MaxTotalSize
	}
	return l
}

// maxLinkTarget bounds the target of a symbolic link (PATH_MAX), and
// maxLinkHops the links one path may pass through (Linux's ELOOP bound).
const (
	maxLinkTarget = 4096
	maxLinkHops   = 40
)

// A TreeError is a commit whose tree WriteTree refuses: it names the
// commit and the entry, and says why. Nothing of such a tree is left on
// disk.
type TreeError struct {
	// Commit is the commit's full hash.
	Commit string
	// Path is the entry, slash-separated from the root of the tree.
	Path string
	// Reason says what is wrong with the entry.
	Reason string
}

func (e *TreeError) Error() string {
	return fmt.Sprintf("commit %s: entry %q %s: driftless writes no such tree; push a commit without it (or pin another)", Short(e.Commit), e.Path, e.Reason)
}

// ErrUnsafeTree is wrapped by every *TreeError.
var ErrUnsafeTree = errors.New("tree refused")

func (e *TreeError) Unwrap() error { return ErrUnsafeTree }

// WriteTree writes the tree of commit, read from s, into dir, and makes it
// read-only: directories and files lose their write permission (remove
// such a tree with RemoveTree). It writes every checkout that is read:
// the agent's mirror trees, remote Kustomize bases and the CLI's. The one
// other writer is image update's write-back worktree (Mirror.Base), which
// must stay writable to rewrite files: it checks the tree with the same
// rules (planTree) before go-git writes it.
//
// The tree is checked before anything is written, and refused with a
// *TreeError naming the entry when an entry is named "", ".", "..",
// ".git" (in any case) or holds "/" or NUL; when two entries of one
// directory share a name; when a symbolic link's target is absolute,
// leaves the tree (through other links too) or passes through more than
// 40 links; or when the tree is over limits (zero fields are
// DefaultTreeLimits), a file's size being read from its object's header.
// Writes go through an os.Root of dir, so no write follows a symbolic
// link: directories and files are written first, symbolic links last, as
// links. Submodules are left out. dir may exist (a clone's .git may be in
// it); on failure, what was written into it is left for the caller to
// remove.
func WriteTree(s storer.EncodedObjectStorer, commit plumbing.Hash, dir string, limits TreeLimits) error {
	p, err := planTree(s, commit, limits.withDefaults())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return p.write(root, s)
}

// treePlan is a checked tree: what WriteTree writes, in order.
type treePlan struct {
	commit string
	dirs   []string // parents before children
	files  []planFile
	links  []planLink
}

type planFile struct {
	path string
	hash plumbing.Hash
	size int64
	exec bool
}

type planLink struct {
	path, target string
}

// planTree reads and checks the tree of commit.
func planTree(s storer.EncodedObjectStorer, commit plumbing.Hash, limits TreeLimits) (*treePlan, error) {
	c, err := object.GetCommit(s, commit)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", Short(commit.String()), err)
	}
	p := &treePlan{commit: commit.String()}
	w := &treeWalk{s: s, plan: p, limits: limits, links: map[string]string{}}
	if err := w.walk(c.TreeHash, ""); err != nil {
		return nil, err
	}
	for _, l := range p.links {
		if reason := linkLeaves(w.links, l.path); reason != "" {
			return nil, w.refuse(l.path, reason)
		}
	}
	return p, nil
}

type treeWalk struct {
	s       storer.EncodedObjectStorer
	plan    *treePlan
	limits  TreeLimits
	entries int
	total   int64
	links   map[string]string // path → target
}

func (w *treeWalk) refuse(p, reason string) error {
	return &TreeError{Commit: w.plan.commit, Path: p, Reason: reason}
}

// walk checks the tree hash at dir ("" is the root) and adds what it
// holds to the plan.
func (w *treeWalk) walk(hash plumbing.Hash, dir string) error {
	t, err := object.GetTree(w.s, hash)
	if err != nil {
		return w.refuse(dir, fmt.Sprintf("is a directory that cannot be read (%v)", err))
	}
	kinds := make(map[string]string, len(t.Entries))
	for _, e := range t.Entries {
		p := path.Join(dir, e.Name)
		if dir == "" {
			p = e.Name
		}
		if reason := badName(e.Name); reason != "" {
			return w.refuse(p, reason)
		}
		kind := modeKind(e.Mode)
		if prev, ok := kinds[e.Name]; ok {
			return w.refuse(p, fmt.Sprintf("is named twice in its directory (%s and %s)", prev, kind))
		}
		kinds[e.Name] = kind
		if w.entries++; w.entries > w.limits.MaxEntries {
			return w.refuse(p, fmt.Sprintf("is past the %d entries a tree may hold", w.limits.MaxEntries))
		}
		if depth := strings.Count(p, "/") + 1; depth > w.limits.MaxDepth {
			return w.refuse(p, fmt.Sprintf("is %d names deep, more than %d", depth, w.limits.MaxDepth))
		}
		switch e.Mode {
		case filemode.Dir:
			w.plan.dirs = append(w.plan.dirs, p)
			if err := w.walk(e.Hash, p); err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			size, err := w.blobSize(p, e.Hash)
			if err != nil {
				return err
			}
			if size > w.limits.MaxFileSize {
				return w.refuse(p, fmt.Sprintf("is a file of %d bytes, more than %d", size, w.limits.MaxFileSize))
			}
			if w.total += size; w.total > w.limits.MaxTotalSize {
				return w.refuse(p, fmt.Sprintf("brings the files to more than %d bytes in all", w.limits.MaxTotalSize))
			}
			w.plan.files = append(w.plan.files, planFile{path: p, hash: e.Hash, size: size, exec: e.Mode == filemode.Executable})
		case filemode.Symlink:
			target, err := w.linkTarget(p, e.Hash)
			if err != nil {
				return err
			}
			w.links[p] = target
			w.plan.links = append(w.plan.links, planLink{path: p, target: target})
		case filemode.Submodule:
			// Not a file of the commit: left out.
		default:
			return w.refuse(p, fmt.Sprintf("has file mode %o, which git does not write", uint32(e.Mode)))
		}
	}
	return nil
}

// blobSize is the size the object hash declares, read from its header.
func (w *treeWalk) blobSize(p string, hash plumbing.Hash) (int64, error) {
	obj, err := w.s.EncodedObject(plumbing.BlobObject, hash)
	if err != nil {
		return 0, w.refuse(p, fmt.Sprintf("is a file whose object %s cannot be read (%v)", Short(hash.String()), err))
	}
	return obj.Size(), nil
}

// linkTarget reads the target of the symbolic link at p.
func (w *treeWalk) linkTarget(p string, hash plumbing.Hash) (string, error) {
	obj, err := w.s.EncodedObject(plumbing.BlobObject, hash)
	if err != nil {
		return "", w.refuse(p, fmt.Sprintf("is a symbolic link whose object %s cannot be read (%v)", Short(hash.String()), err))
	}
	if obj.Size() > maxLinkTarget {
		return "", w.refuse(p, fmt.Sprintf("is a symbolic link whose target is %d bytes, more than %d", obj.Size(), maxLinkTarget))
	}
	r, err := obj.Reader()
	if err != nil {
		return "", w.refuse(p, fmt.Sprintf("is a symbolic link that cannot be read (%v)", err))
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxLinkTarget+1))
	if err != nil {
		return "", w.refuse(p, fmt.Sprintf("is a symbolic link that cannot be read (%v)", err))
	}
	target := string(data)
	switch {
	case target == "":
		return "", w.refuse(p, "is a symbolic link with an empty target")
	case strings.ContainsRune(target, 0):
		return "", w.refuse(p, "is a symbolic link whose target holds a NUL byte")
	case path.IsAbs(target):
		return "", w.refuse(p, fmt.Sprintf("is a symbolic link to the absolute path %q, outside the repository", target))
	}
	return target, nil
}

// badName says what is wrong with the name of a tree entry, or "".
func badName(name string) string {
	switch {
	case name == "":
		return "has an empty name"
	case name == "." || name == "..":
		return fmt.Sprintf("is named %q", name)
	case strings.EqualFold(name, ".git"):
		return "is named .git, which is git's own directory"
	case strings.ContainsRune(name, '/'):
		return "has a name holding \"/\""
	case strings.ContainsRune(name, 0):
		return "has a name holding a NUL byte"
	}
	return ""
}

func modeKind(m filemode.FileMode) string {
	switch m {
	case filemode.Dir:
		return "a directory"
	case filemode.Symlink:
		return "a symbolic link"
	case filemode.Submodule:
		return "a submodule"
	}
	return "a file"
}

// linkLeaves says how the symbolic link at p leads out of the tree, or ""
// when it stays inside: its target is resolved as the kernel would,
// through the tree's other links (links, path → target), name by name.
func linkLeaves(links map[string]string, p string) string {
	cur := strings.Split(path.Dir(p), "/")
	if path.Dir(p) == "." {
		cur = nil
	}
	queue := strings.Split(links[p], "/")
	hops := 1
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return fmt.Sprintf("is a symbolic link to %q, which leads out of the repository", links[p])
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := strings.Join(append(cur[:len(cur):len(cur)], name), "/")
		target, isLink := links[next]
		if !isLink {
			cur = append(cur, name)
			continue
		}
		if hops++; hops > maxLinkHops {
			return fmt.Sprintf("is a symbolic link to %q, which passes through more than %d links", links[p], maxLinkHops)
		}
		if path.IsAbs(target) {
			return fmt.Sprintf("is a symbolic link to %q, which leads through %s to an absolute path", links[p], next)
		}
		queue = append(strings.Split(target, "/"), queue...)
	}
	return ""
}

// write writes the plan into root: directories, files, then links; then
// takes away the write permission of files and directories.
func (p *treePlan) write(root *os.Root, s storer.EncodedObjectStorer) error {
	for _, d := range p.dirs {
		if err := root.Mkdir(filepath.FromSlash(d), 0o700); err != nil {
			return fmt.Errorf("commit %s: write %s: %w", Short(p.commit), d, err)
		}
	}
	for _, f := range p.files {
		if err := p.writeFile(root, s, f); err != nil {
			return fmt.Errorf("commit %s: write %s: %w", Short(p.commit), f.path, err)
		}
	}
	for _, l := range p.links {
		if err := root.Symlink(l.target, filepath.FromSlash(l.path)); err != nil {
			return fmt.Errorf("commit %s: write %s: %w", Short(p.commit), l.path, err)
		}
	}
	// Children before parents, the root last.
	for i := len(p.dirs) - 1; i >= 0; i-- {
		if err := root.Chmod(filepath.FromSlash(p.dirs[i]), 0o555); err != nil {
			return err
		}
	}
	return root.Chmod(".", 0o555)
}

func (p *treePlan) writeFile(root *os.Root, s storer.EncodedObjectStorer, f planFile) error {
	obj, err := s.EncodedObject(plumbing.BlobObject, f.hash)
	if err != nil {
		return err
	}
	in, err := obj.Reader()
	if err != nil {
		return err
	}
	defer in.Close()
	name := filepath.FromSlash(f.path)
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, f.size))
	if err = errors.Join(err, out.Close()); err != nil {
		return err
	}
	if n != f.size {
		return fmt.Errorf("its object holds %d bytes, not the %d it declares", n, f.size)
	}
	mode := fs.FileMode(0o444)
	if f.exec {
		mode = 0o555
	}
	return root.Chmod(name, mode)
}

// RemoveTree removes dir, a tree WriteTree wrote (or anything else),
// giving its directories back their write permission first.
func RemoveTree(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// removeGitDir removes the .git of dir, a tree WriteTree wrote.
func removeGitDir(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := RemoveTree(filepath.Join(dir, ".git")); err != nil {
		return err
	}
	return os.Chmod(dir, 0o555)
}
