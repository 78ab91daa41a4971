package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/driftless/driftless/internal/source/oci"
)

// The Mirror serves a Request with OCI set from an oci.Store: resolve
// asks the registry, a checkout is the artifact's extracted files, and
// what only git has (paths digests, commits, history) is unknown.

func (m *Mirror) artifacts() *oci.Store {
	m.ociOnce.Do(func() {
		l := m.Limits.withDefaults()
		m.oci = &oci.Store{
			Dir:    filepath.Join(filepath.Dir(m.Dir), "artifacts"),
			Limits: oci.Limits{MaxDepth: l.MaxDepth, MaxEntries: l.MaxEntries, MaxFileSize: l.MaxFileSize, MaxTotalSize: l.MaxTotalSize},
			AfterExtract: func() {
				if m.AfterFetch != nil {
					m.AfterFetch()
				}
			},
		}
	})
	return m.oci
}

// checkoutOCI is the tree of an artifact: its extracted files, held (a
// CacheLimit leaves them alone) until the tree is released.
func (m *Mirror) checkoutOCI(ctx context.Context, req Request, revision string) (Tree, error) {
	dir, release, err := m.artifacts().Open(ctx, *req.OCI, revision)
	if err != nil {
		return Tree{}, ociError(err)
	}
	m.trees.Add(1)
	return Tree{Dir: dir, Revision: revision, release: release}, nil
}

// checkoutOCI is Checkout of an OCI artifact into dir, replacing what
// dir held.
func checkoutOCI(ctx context.Context, req Request, revision, dir string) (string, error) {
	if err := RemoveTree(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	l := DefaultTreeLimits()
	limits := oci.Limits{MaxDepth: l.MaxDepth, MaxEntries: l.MaxEntries, MaxFileSize: l.MaxFileSize, MaxTotalSize: l.MaxTotalSize}
	if err := oci.Pull(ctx, *req.OCI, revision, dir, limits); err != nil {
		_ = RemoveTree(dir)
		return "", ociError(err)
	}
	return revision, nil
}

// ociError makes an artifact's verification failure a
// *VerificationError, as a git revision's is.
func ociError(err error) error {
	var ve *oci.VerificationError
	if errors.As(err, &ve) {
		return &VerificationError{Err: err}
	}
	return err
}

// errNotGit is the error of what only a git source has.
var errNotGit = errors.New("an OCI artifact has no git history: holds and commit details apply to git sources only")

func notGit(req Request) error {
	return fmt.Errorf("%s: %w", req.OCI.URL, errNotGit)
}
