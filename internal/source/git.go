package source

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
)

// Ref is what to check out. At most one field is set; none means branch
// "master".
type Ref struct {
	Branch string
	Tag    string
	Commit string
}

// String names the ref for people: "branch main", "tag v1.2", "commit 1a2b3c4".
func (r Ref) String() string {
	switch {
	case r.Commit != "":
		return "commit " + Short(r.Commit)
	case r.Tag != "":
		return "tag " + r.Tag
	}
	return "branch " + r.branch()
}

func (r Ref) branch() string {
	if r.Branch == "" {
		return "master"
	}
	return r.Branch
}

// Request says which repository and ref to fetch.
type Request struct {
	URL         string
	Ref         Ref
	Credentials Credentials
	// Verify, when set, makes Checkout refuse a revision without a
	// trusted signature.
	Verify *Verification
	// OCI, when set, makes the source an OCI artifact instead of git:
	// URL, Ref, Credentials and Verify are not used (see oci_source.go).
	OCI *oci.Request
}

// Short is the first 7 characters of a revision.
func Short(revision string) string {
	if strings.Contains(revision, "sha256:") {
		return oci.Short(revision)
	}
	if len(revision) > 7 {
		return revision[:7]
	}
	return revision
}

// Resolve asks the remote which commit req.Ref points to, without
// fetching objects. A commit ref resolves to itself.
func Resolve(ctx context.Context, req Request) (string, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		return oci.Resolve(ctx, *req.OCI)
	}
	if req.Ref.Commit != "" {
		return req.Ref.Commit, nil
	}
	auth, err := req.Credentials.authMethod(req.URL)
	if err != nil {
		return "", err
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{req.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return "", fetchError(req, err)
	}
	var want []plumbing.ReferenceName
	if req.Ref.Tag != "" {
		want = []plumbing.ReferenceName{plumbing.NewTagReferenceName(req.Ref.Tag)}
	} else {
		want = []plumbing.ReferenceName{plumbing.NewBranchReferenceName(req.Ref.branch())}
	}
	// An annotated tag is listed twice: the tag object and, peeled with
	// "^{}", the commit it points to. Prefer the commit.
	var found string
	for _, ref := range refs {
		for _, w := range want {
			switch ref.Name().String() {
			case w.String() + "^{}":
				return ref.Hash().String(), nil
			case w.String():
				found = ref.Hash().String()
			}
		}
	}
	if found == "" {
		return "", fmt.Errorf("%s not found in %s: check spec.source.git", req.Ref, Redact(req.URL))
	}
	return found, nil
}

// Checkout makes dir a checkout of revision of req, reusing it when it
// already holds that revision. It returns the checked-out revision. For
// branches and tags it fetches only the one commit (shallow). dir holds
// the clone's objects in dir/.git and the revision's files, written by
// WriteTree with DefaultTreeLimits and read-only: remove dir with
// RemoveTree. A tree WriteTree refuses fails with a *TreeError.
//
// With req.Verify set, a revision without the trusted signature it asks
// for is refused with a *VerificationError, and dir is left as it was:
// nothing of the refused revision is written there.
func Checkout(ctx context.Context, req Request, revision, dir string) (string, error) {
	return checkoutWithin(ctx, req, revision, dir, TreeLimits{})
}

// checkoutWithin is Checkout with limits on the tree.
func checkoutWithin(ctx context.Context, req Request, revision, dir string, limits TreeLimits) (string, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		return checkoutOCI(ctx, req, revision, dir)
	}
	if head, err := headOf(dir); err == nil && head == revision &&
		(req.Verify == nil || req.Verify.verifyCheckout(dir, req.Ref, revision) == nil) {
		return revision, nil
	}
	auth, err := req.Credentials.authMethod(req.URL)
	if err != nil {
		return "", err
	}
	tmp := dir + ".tmp"
	if err := RemoveTree(tmp); err != nil {
		return "", err
	}
	opts := &git.CloneOptions{URL: req.URL, Auth: auth, Tags: git.NoTags}
	switch {
	case req.Ref.Commit != "":
		// A commit may not be the tip of any ref: fetch the full history.
	case req.Ref.Tag != "":
		opts.ReferenceName, opts.SingleBranch, opts.Depth = plumbing.NewTagReferenceName(req.Ref.Tag), true, 1
	default:
		opts.ReferenceName, opts.SingleBranch, opts.Depth = plumbing.NewBranchReferenceName(req.Ref.branch()), true, 1
	}
	// Only the objects are cloned (bare, into .git): the files are
	// WriteTree's to write, never go-git's worktree.
	repo, err := git.PlainCloneContext(ctx, filepath.Join(tmp, ".git"), true, opts)
	if err != nil {
		_ = RemoveTree(tmp)
		return "", fetchError(req, err)
	}
	if req.Verify != nil {
		if err := req.Verify.verifyRevision(repo, req.Ref, revision); err != nil {
			_ = RemoveTree(tmp)
			return "", err
		}
	}
	hash := plumbing.NewHash(revision)
	if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, hash)); err != nil {
		_ = RemoveTree(tmp)
		return "", err
	}
	if err := WriteTree(repo.Storer, hash, tmp, limits); err != nil {
		_ = RemoveTree(tmp)
		return "", fmt.Errorf("check out %s of %s: %w", Short(revision), Redact(req.URL), err)
	}
	if err := RemoveTree(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return headOf(dir)
}

func headOf(dir string) (string, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return "", err
	}
	head, err := repo.Head()
	if err != nil {
		return "", err
	}
	return head.Hash().String(), nil
}

// fetchError words a transport failure for the Sync's condition.
func fetchError(req Request, err error) error {
	msg := redactAll(err.Error(), req)
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("fetch %s: %s: check the credentials in spec.source.git.secretRef", Redact(req.URL), msg)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("fetch %s: repository not found: check spec.source.git.url", Redact(req.URL))
	}
	return fmt.Errorf("fetch %s: %s", Redact(req.URL), msg)
}

var userinfo = regexp.MustCompile(`(://)[^/@\s]+@`)

// Redact removes any password or token from a repository URL.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return userinfo.ReplaceAllString(raw, "${1}***@")
	}
	if _, hasPassword := u.User.Password(); !hasPassword && u.User.Username() != "git" {
		// A token passed as the user name (https://TOKEN@host/...).
		u.User = url.User("xxxxx")
		return u.String()
	}
	return u.Redacted()
}

// redactAll removes every secret of req from s.
func redactAll(s string, req Request) string {
	for _, secret := range []string{req.Credentials.Password, req.Credentials.Token} {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "***")
		}
	}
	if u, err := url.Parse(req.URL); err == nil && u.User != nil {
		s = strings.ReplaceAll(s, req.URL, Redact(req.URL))
		if p, ok := u.User.Password(); ok && len(p) >= 4 {
			s = strings.ReplaceAll(s, p, "***")
		} else if name := u.User.Username(); !ok && name != "git" && len(name) >= 4 {
			// A token passed as the user name.
			s = strings.ReplaceAll(s, name, "***")
		}
	}
	return s
}

// RedactError returns err with the credentials of req — its password or
// token, and those written into its URL — masked in the message; errors.Is
// and errors.As still see the errors err wraps.
func RedactError(err error, req Request) error {
	if err == nil {
		return nil
	}
	msg := redactAll(err.Error(), req)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
