package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
)

// ErrNoBranch is wrapped by the error of Base when the remote has no
// branch of that name.
var ErrNoBranch = errors.New("no such branch")

// Base makes dir (emptied first) a repository to commit on top of the tip
// of req's branch, for a writer that pushes to it: the mirror fetches the
// tip (only the objects it does not have yet), and dir receives the tip's
// commit and files from the mirror's objects, with no history (shallow)
// and no fetch of its own. dir's branch of the same name is checked out
// at the tip; its remote origin is req's URL without credentials, so a
// push names req.URL in full (PushOptions.RemoteURL). With paths, only
// the files under them are written (a sparse checkout); the index still
// holds every file, so a commit keeps the others as they are.
//
// When req.Verify is set, the tip must carry the signature it asks for: a
// writer that signs with a trusted key must not vouch for a commit that
// is not trusted itself.
func (m *Mirror) Base(ctx context.Context, req Request, dir string, paths []string) (*git.Repository, error) {
	if req.Ref.Tag != "" || req.Ref.Commit != "" {
		return nil, fmt.Errorf("a base must be a branch, not %s", req.Ref)
	}
	branch := req.Ref.branch()
	r, err := m.repo(req)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		return nil, err
	}
	tip, err := m.copyTip(ctx, r, req, repo.Storer)
	if err != nil {
		return nil, err
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{Redact(req.URL)}}); err != nil {
		return nil, err
	}
	local := plumbing.NewBranchReferenceName(branch)
	for _, ref := range []*plumbing.Reference{
		plumbing.NewHashReference(local, tip.Hash()),
		plumbing.NewHashReference(plumbing.NewRemoteReferenceName("origin", branch), tip.Hash()),
		plumbing.NewSymbolicReference(plumbing.HEAD, local),
	} {
		if err := repo.Storer.SetReference(ref); err != nil {
			return nil, err
		}
	}
	// go-git's worktree writes these files (the writer commits from its
	// index): the tree is checked first as WriteTree checks it, so no path
	// passes through a link, leads out or names .git.
	if _, err := planTree(repo.Storer, tip.Hash(), m.Limits.withDefaults()); err != nil {
		return nil, err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	if err := wt.ResetSparsely(&git.ResetOptions{Commit: tip.Hash(), Mode: git.HardReset}, sparse(paths)); err != nil {
		return nil, fmt.Errorf("check out the tip %s of branch %s: %w", Short(tip.Hash().String()), branch, err)
	}
	return repo, nil
}

// copyTip fetches the tip of req's branch into the mirror, checks its
// signature if req asks, and copies it into to; it holds r.mu after the
// fetch, not for the checkout that follows.
func (m *Mirror) copyTip(ctx context.Context, r *mirrored, req Request, to storage.Storer) (*plumbing.Reference, error) {
	branch := req.Ref.branch()
	if err := m.fetch(ctx, r, req, nil); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	tip, err := r.repo.Reference(plumbing.NewRemoteReferenceName("origin", branch), true)
	if err != nil {
		return nil, fmt.Errorf("branch %s of %s after fetch: %w", branch, Redact(req.URL), err)
	}
	commit, err := r.repo.CommitObject(tip.Hash())
	if err != nil {
		return nil, fmt.Errorf("read the tip %s of branch %s: %w", Short(tip.Hash().String()), branch, err)
	}
	if req.Verify != nil {
		if err := req.Verify.verifyRevision(r.repo, req.Ref, tip.Hash().String()); err != nil {
			return nil, err
		}
	}
	if err := copyObjects(r.repo.Storer, to, commit); err != nil {
		return nil, fmt.Errorf("copy the tip %s of branch %s from the mirror: %w", Short(tip.Hash().String()), branch, err)
	}
	return tip, nil
}

// noBranchError is a fetch error for a branch the remote does not have.
type noBranchError struct{ err error }

func (e *noBranchError) Error() string        { return e.err.Error() }
func (e *noBranchError) Unwrap() error        { return e.err }
func (e *noBranchError) Is(target error) bool { return target == ErrNoBranch }

// copyObjects writes commit, its tree and every object under it from one
// storage into another as one packfile, and marks commit as the shallow
// boundary of to: its parents are not copied.
func copyObjects(from storer.EncodedObjectStorer, to storage.Storer, commit *object.Commit) error {
	hashes := []plumbing.Hash{commit.Hash, commit.TreeHash}
	tree, err := commit.Tree()
	if err != nil {
		return err
	}
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		_, entry, err := walker.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if entry.Mode.IsFile() || entry.Mode == filemode.Dir {
			hashes = append(hashes, entry.Hash)
		}
	}
	pw, ok := to.(storer.PackfileWriter)
	if !ok {
		return errors.New("the storage cannot take a packfile")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := packfile.NewEncoder(w, from, false).Encode(hashes, 0); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return to.SetShallow([]plumbing.Hash{commit.Hash})
}

// sparse returns the directories of a sparse checkout of paths: nil (all)
// when one of them is the root. A path is a prefix: "apps" also writes
// "apps2/", which costs time, not correctness.
func sparse(paths []string) []string {
	var dirs []string
	for _, p := range paths {
		p = path.Clean(strings.TrimPrefix(p, "/"))
		if p == "." || p == "" {
			return nil
		}
		dirs = append(dirs, p)
	}
	return dirs
}
