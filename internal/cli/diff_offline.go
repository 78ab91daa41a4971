package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// offlineDiff renders the revisions o.from and o.to of o.repo without a
// cluster and reports the objects added, removed and modified between
// them.
func offlineDiff(ctx context.Context, o *diffOptions) (*diffReport, error) {
	decrypt, err := localDecryptor()
	if err != nil {
		return nil, err
	}
	o.decrypt = decrypt
	tmp, err := os.MkdirTemp("", "driftless-diff-")
	if err != nil {
		return nil, err
	}
	defer source.RemoveTree(tmp)
	repo, err := openRepo(o.repo)
	if err != nil {
		return nil, err
	}
	from, err := repo.checkout(ctx, "--from", o.from, filepath.Join(tmp, "from"))
	if err != nil {
		return nil, err
	}
	to, err := repo.checkout(ctx, "--to", o.to, filepath.Join(tmp, "to"))
	if err != nil {
		return nil, err
	}
	var before, after []render.Object
	if before, err = from.render(o); err != nil {
		return nil, err
	}
	if after, err = to.render(o); err != nil {
		return nil, err
	}
	r := newDiffReport(from.label, to.label)
	r.decrypted = decryptedIDs(before, after)
	if r.secrets, err = engine.Redactor(nil, append(slices.Clip(before), after...)); err != nil {
		return nil, err
	}
	if err := r.compare(before, after); err != nil {
		return nil, err
	}
	return r, nil
}

// compare records the objects of after that are not in before (create),
// those of before not in after (delete) and those in both that differ
// other than in the revision of their origin annotation (update).
func (r *diffReport) compare(before, after []render.Object) error {
	old := make(map[plan.ID]render.Object, len(before))
	entries := make([]plan.Entry, 0, len(before))
	for _, o := range before {
		id := plan.ObjectID(o)
		old[id] = o
		entries = append(entries, plan.Entry{ID: id, Version: o.GVK.Version})
	}
	// The plan of after against before as inventory orders the changes
	// as the agent would make them, and its prunes are the removals.
	p := plan.New(after, entries)
	for _, s := range p.Apply {
		desired, err := s.Desired()
		if err != nil {
			return err
		}
		prev, ok := old[s.ID]
		if !ok {
			if err := r.add(diffCreate, s.ID, s.Object.Origin.String(), "", nil, desired); err != nil {
				return err
			}
			continue
		}
		previous, err := prev.Decode()
		if err != nil {
			return err
		}
		if reflect.DeepEqual(forDisplay(previous), forDisplay(desired)) {
			r.Summary.Unchanged++
			continue
		}
		if err := r.add(diffUpdate, s.ID, s.Object.Origin.String(), "", previous, desired); err != nil {
			return err
		}
	}
	for _, e := range p.Prune {
		prev := old[e.ID]
		previous, err := prev.Decode()
		if err != nil {
			return err
		}
		if err := r.add(diffDelete, e.ID, prev.Origin.String(), "", previous, nil); err != nil {
			return err
		}
	}
	return nil
}

// offlineRepo is the repository of an offline diff: a local clone, read
// in place, or a URL, fetched.
type offlineRepo struct {
	url   string          // for fetching, when not local
	local *git.Repository // a local clone
	dir   string          // the local clone's directory
}

// openRepo opens repo, a directory holding a clone or a repository URL.
func openRepo(repo string) (*offlineRepo, error) {
	if fi, err := os.Stat(repo); err == nil && fi.IsDir() {
		r, err := git.PlainOpen(repo)
		if err != nil {
			return nil, fmt.Errorf("--repo %s: not a git repository (%w); pass the top directory of a clone", repo, err)
		}
		return &offlineRepo{local: r, dir: repo}, nil
	}
	if strings.Contains(repo, "://") {
		return &offlineRepo{url: repo}, nil
	}
	return nil, fmt.Errorf("--repo %q is neither a directory nor a URL: pass a local clone, or a file://, http:// or https:// URL", repo)
}

// diffSide is one checked-out side of an offline diff.
type diffSide struct {
	flag, ref, revision string
	dir                 string
	label               string
}

// checkout writes the tree of ref (named by flag, for errors) into dir.
func (r *offlineRepo) checkout(ctx context.Context, flag, ref, dir string) (*diffSide, error) {
	co := &diffSide{flag: flag, ref: ref, dir: dir}
	if r.local != nil {
		hash, err := resolveLocal(r.local, ref)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a branch, tag or commit of %s: %w", flag, ref, r.dir, err)
		}
		co.revision = hash.String()
		if err := source.WriteTree(r.local.Storer, hash, dir, source.TreeLimits{}); err != nil {
			return nil, fmt.Errorf("%s %q: read commit %s of %s: %w", flag, ref, source.Short(co.revision), r.dir, err)
		}
	} else {
		req, rev, err := resolveRef(ctx, source.Request{URL: r.url}, flag, ref)
		if err != nil {
			return nil, err
		}
		co.revision = rev
		if _, err := source.Checkout(ctx, req, rev, dir); err != nil {
			return nil, fmt.Errorf("%s %q: %w", flag, ref, err)
		}
	}
	co.label = source.Short(co.revision)
	if !strings.HasPrefix(co.revision, ref) {
		co.label = fmt.Sprintf("%s (%s)", ref, co.label)
	}
	return co, nil
}

// render renders the side as a Sync of o's paths would be rendered, but
// without a sync label and scoping kinds without a cluster.
func (co *diffSide) render(o *diffOptions) ([]render.Object, error) {
	objects, err := render.Render(render.Options{
		Root:            co.dir,
		Paths:           o.paths,
		Revision:        co.revision,
		TargetNamespace: o.targetNamespace,
		Scope:           engine.BuiltinScope{},
		Budgets:         o.budgets,
		Decrypt:         o.decrypt,
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", co.flag, co.label, err)
	}
	return objects, nil
}

// resolveLocal resolves ref in a local clone: a branch, else a tag, else
// anything git rev-parse would resolve (HEAD, origin/main, a short SHA).
func resolveLocal(repo *git.Repository, ref string) (plumbing.Hash, error) {
	for _, name := range []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)} {
		if r, err := repo.Reference(name, true); err == nil {
			return peelToCommit(repo, r.Hash())
		}
	}
	h, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return peelToCommit(repo, *h)
}

// commitOf peels an annotated tag to its commit.
func peelToCommit(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	if tag, err := repo.TagObject(h); err == nil {
		c, err := tag.Commit()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return c.Hash, nil
	}
	return h, nil
}
