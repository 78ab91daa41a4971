package testenv

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// A CraftedTree is a git tree that no git client makes and a checkout must
// refuse: two entries of one name, a symbolic link and then a directory of
// its name (which a writer that follows links writes through), names git
// reserves, links that lead out, paths too deep, a file too large. Each is
// built with go-git plumbing around one good file, app.yaml.
type CraftedTree struct {
	// Name says what is wrong, as a test name.
	Name string
	// Entry is the path of the entry the refusal must name.
	Entry string
	// Build writes the tree's objects into s and returns the root tree's
	// hash. app is the content of the good file app.yaml.
	Build func(b *TreeBuilder, app string) plumbing.Hash
	// Local is set for a tree that only a repository of this process can
	// hold: its objects are not what they declare, so no git server can
	// send them.
	Local bool
}

// TreeBuilder writes git objects into a storer, as they are given:
// entries are neither sorted nor checked.
type TreeBuilder struct {
	t testing.TB
	S storer.EncodedObjectStorer
}

// NewTreeBuilder writes into s.
func NewTreeBuilder(t testing.TB, s storer.EncodedObjectStorer) *TreeBuilder {
	return &TreeBuilder{t: t, S: s}
}

// Blob stores content and returns its hash.
func (b *TreeBuilder) Blob(content string) plumbing.Hash {
	obj := b.S.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err == nil {
		_, err = io.WriteString(w, content)
	}
	if err == nil {
		err = w.Close()
	}
	return b.store(obj, err)
}

// Tree stores a tree of entries, in the order given (go-git's encoder
// refuses entries out of git's order).
func (b *TreeBuilder) Tree(entries ...object.TreeEntry) plumbing.Hash {
	obj := b.S.NewEncodedObject()
	obj.SetType(plumbing.TreeObject)
	w, err := obj.Writer()
	for _, e := range entries {
		if err == nil {
			_, err = fmt.Fprintf(w, "%o %s\x00", uint32(e.Mode), e.Name)
		}
		if err == nil {
			_, err = w.Write(e.Hash[:])
		}
	}
	if err == nil {
		err = w.Close()
	}
	return b.store(obj, err)
}

func (b *TreeBuilder) store(obj plumbing.EncodedObject, err error) plumbing.Hash {
	b.t.Helper()
	var h plumbing.Hash
	if err == nil {
		h, err = b.S.SetEncodedObject(obj)
	}
	if err != nil {
		b.t.Fatalf("store a crafted object: %v", err)
	}
	return h
}

// File, Link and Dir are the entries of a tree.
func (b *TreeBuilder) File(name, content string) object.TreeEntry {
	return object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: b.Blob(content)}
}

func (b *TreeBuilder) Link(name, target string) object.TreeEntry {
	return object.TreeEntry{Name: name, Mode: filemode.Symlink, Hash: b.Blob(target)}
}

func (b *TreeBuilder) Dir(name string, entries ...object.TreeEntry) object.TreeEntry {
	return object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: b.Tree(entries...)}
}

// Commit stores a commit of tree with parent (none when zero).
func (b *TreeBuilder) Commit(tree, parent plumbing.Hash, message string) plumbing.Hash {
	sig := object.Signature{Name: "driftless test", Email: "test@driftless.dev", When: time.Unix(1700000000, 0).UTC()}
	c := &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: tree}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	obj := b.S.NewEncodedObject()
	return b.store(obj, c.Encode(obj))
}

// declaredBlob is a blob whose header declares size bytes but which holds
// only content: a file too large, refused from its header, at no cost.
type declaredBlob struct {
	plumbing.MemoryObject
	size int64
	hash plumbing.Hash
}

func (o *declaredBlob) Size() int64         { return o.size }
func (o *declaredBlob) Hash() plumbing.Hash { return o.hash }

// DeclaredBlob stores a blob that declares size bytes and holds content;
// only a storer of this process can hold it (see CraftedTree.Local).
func (b *TreeBuilder) DeclaredBlob(size int64, content string) plumbing.Hash {
	o := &declaredBlob{size: size, hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(fmt.Sprintf("declared %d %s", size, content)))}
	o.SetType(plumbing.BlobObject)
	if _, err := o.Write([]byte(content)); err != nil {
		b.t.Fatal(err)
	}
	return b.store(o, nil)
}

// DeepPath is the path of n directories named d.
func DeepPath(n int) string {
	return strings.TrimSuffix(strings.Repeat("d/", n), "/")
}

// CraftedDepth is how deep the deep tree of CraftedTrees goes.
const CraftedDepth = 10_000

// CraftedTrees returns the corpus. maxDepth is the deepest path a checkout
// writes: the deep tree's refusal names the entry one deeper.
func CraftedTrees(maxDepth int) []CraftedTree {
	return []CraftedTree{
		{Name: "a symbolic link and then a directory of its name", Entry: "a", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), b.Link("a", "../.."), b.Dir("a", b.File("evil.yaml", "planted: true\n")))
		}},
		{Name: "a directory and then a symbolic link of its name", Entry: "a", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.Dir("a", b.File("evil.yaml", "planted: true\n")), b.Link("a", "../.."), b.File("app.yaml", app))
		}},
		{Name: "two files of one name", Entry: "app.yaml", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), b.File("app.yaml", "kind: Other\n"))
		}},
		{Name: "a file and a directory of one name, deeper down", Entry: "apps/web", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), b.Dir("apps", b.File("web", "x: 1\n"), b.Dir("web", b.File("app.yaml", app))))
		}},
		{Name: "a directory named .git", Entry: ".git", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.Dir(".git", b.File("config", "[core]\n\tfsmonitor = touch /tmp/pwned\n")), b.File("app.yaml", app))
		}},
		{Name: "a directory named .GIT further down", Entry: "sub/.GIT", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), b.Dir("sub", b.Dir(".GIT", b.File("HEAD", "ref: refs/heads/main\n"))))
		}},
		{Name: "a directory named ..", Entry: "..", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.Dir("..", b.File("evil.yaml", "planted: true\n")), b.File("app.yaml", app))
		}},
		{Name: "a name holding a slash", Entry: "x/../../evil.yaml", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), b.File("x/../../evil.yaml", "planted: true\n"))
		}},
		{Name: "a symbolic link to an absolute path", Entry: "etc", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), b.Link("etc", "/etc"))
		}},
		{Name: "a symbolic link out of the tree through ..", Entry: "sub/up", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), b.Dir("sub", b.Link("up", "../../outside")))
		}},
		{Name: "a chain of symbolic links that leads out", Entry: "a", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			// a → b/x → sub/up/x → (sub/)../../x: each link alone but the
			// last stays inside.
			return b.Tree(b.Link("a", "b/x"), b.File("app.yaml", app), b.Link("b", "sub/up"), b.Dir("sub", b.Link("up", "../..")))
		}},
		{Name: "a loop of symbolic links", Entry: "a", Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.Link("a", "b"), b.File("app.yaml", app), b.Link("b", "a"))
		}},
		{Name: "a path 10,000 names deep", Entry: DeepPath(maxDepth + 1), Build: func(b *TreeBuilder, app string) plumbing.Hash {
			h := b.Tree(b.File("app.yaml", app))
			for range CraftedDepth {
				h = b.Tree(object.TreeEntry{Name: "d", Mode: filemode.Dir, Hash: h})
			}
			return b.Tree(b.File("app.yaml", app), object.TreeEntry{Name: "d", Mode: filemode.Dir, Hash: h})
		}},
		{Name: "a file of 1 GiB declared", Entry: "big.bin", Local: true, Build: func(b *TreeBuilder, app string) plumbing.Hash {
			return b.Tree(b.File("app.yaml", app), object.TreeEntry{Name: "big.bin", Mode: filemode.Regular, Hash: b.DeclaredBlob(1<<30, "tiny")})
		}},
	}
}

// CommitTree commits a tree that build writes (see CraftedTrees) on top of
// the current branch of the working clone, and pushes it with git; the
// working clone's files and index stay as they were, so the next Commit
// writes a tree of them again. It returns the new commit's hash.
func (r *Repo) CommitTree(t testing.TB, message string, build func(b *TreeBuilder) plumbing.Hash) string {
	t.Helper()
	repo, err := git.PlainOpen(r.Work)
	if err != nil {
		t.Fatal(err)
	}
	var parent plumbing.Hash
	if head, err := repo.Head(); err == nil {
		parent = head.Hash()
	}
	b := NewTreeBuilder(t, repo.Storer)
	commit := b.Commit(build(b), parent, message)
	branch := r.git(t, r.Work, "rev-parse", "--abbrev-ref", "HEAD")
	r.git(t, r.Work, "update-ref", "refs/heads/"+branch, commit.String())
	r.git(t, r.Work, "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	return commit.String()
}
