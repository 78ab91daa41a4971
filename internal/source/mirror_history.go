package source

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftless/driftless/api/v1alpha1"
)

// ErrNotInHistory is wrapped by Mirror.Behind's error when a revision is
// not in the history of its branch's tip.
var ErrNotInHistory = errors.New("not in the branch's history")

// Behind returns how many commits revision is behind tip, the tip of
// req's branch: the commits from tip back to revision along first parents
// (what a branch that only moves forward, by merges or fast-forwards,
// went through since it was at revision); for a revision off that line
// (a commit of a merged side branch) every commit the walk back from tip
// meets before it. It wraps ErrNotInHistory when revision is not
// reachable from tip, and returns the *VerificationError of Checkout
// when req.Verify is set and revision is not signed as it asks.
//
// It reads the mirror's objects, fetching tip if the mirror lacks it, and
// the branch's whole history once when the mirror's shallow fetches of
// its tips left a gap between tip and revision.
func (m *Mirror) Behind(ctx context.Context, req Request, tip, revision string) (int, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		return 0, notGit(req)
	}
	if req.Ref.Tag != "" || req.Ref.Commit != "" {
		return 0, fmt.Errorf("%s is not a branch: only the history of a branch is walked", req.Ref)
	}
	if !plumbing.IsHash(tip) || !plumbing.IsHash(revision) {
		return 0, fmt.Errorf("revisions %q and %q are not both full commit hashes", tip, revision)
	}
	r, err := m.repo(req)
	if err != nil {
		return 0, err
	}
	head, err := m.commit(ctx, r, req, tip)
	if err != nil {
		return 0, err
	}
	if head == nil {
		return 0, fmt.Errorf("fetch %s: %s moved on since it was resolved at %s: it is fetched again at the next sync", Redact(req.URL), req.Ref, Short(tip))
	}
	n, found, complete := m.walkBack(r, tip, revision)
	if !found && !complete {
		// A shallow mirror: fetch the branch's whole history and walk
		// again.
		if err := m.fetchDeep(ctx, r, req, nil, true); err != nil {
			return 0, err
		}
		n, found, complete = m.walkBack(r, tip, revision)
	}
	switch {
	case !found && complete:
		return 0, fmt.Errorf("commit %s: %w %s (tip %s)", Short(revision), ErrNotInHistory, req.Ref, Short(tip))
	case !found:
		return 0, fmt.Errorf("commit %s: cannot tell whether it is in the history of %s (tip %s): the history fetched from %s is incomplete",
			Short(revision), req.Ref, Short(tip), Redact(req.URL))
	}
	if err := m.verify(ctx, r, req, revision); err != nil {
		return 0, err
	}
	return n, nil
}

// walkBack walks the mirror's history back from tip to revision: along
// first parents, then, if revision is not on that line, every parent of
// every commit, not past revision. It returns the number of commits met
// other than revision, whether revision was met, and whether the walk was
// complete (no commit missing from the mirror).
func (m *Mirror) walkBack(r *mirrored, tip, revision string) (int, bool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := plumbing.NewHash(revision)
	h, steps := plumbing.NewHash(tip), 0
	for h != want {
		c, err := r.repo.CommitObject(h)
		if err != nil {
			return 0, false, false
		}
		if len(c.ParentHashes) == 0 {
			return m.walkAll(r, tip, want)
		}
		h, steps = c.ParentHashes[0], steps+1
	}
	return steps, true, true
}

// walkAll is walkBack through every parent. r.mu is held.
func (m *Mirror) walkAll(r *mirrored, tip string, want plumbing.Hash) (int, bool, bool) {
	seen := map[plumbing.Hash]bool{}
	queue := []plumbing.Hash{plumbing.NewHash(tip)}
	found, complete := false, true
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		if seen[h] {
			continue
		}
		if h == want {
			found = true
			continue
		}
		c, err := r.repo.CommitObject(h)
		if err != nil {
			complete = false
			continue
		}
		seen[h] = true
		queue = append(queue, c.ParentHashes...)
	}
	return len(seen), found, complete
}
