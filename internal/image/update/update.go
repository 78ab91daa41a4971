package update

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/setters"
	"github.com/driftless/driftless/internal/source"
)

// DefaultMessage is the commit message template when the Sync sets none.
const DefaultMessage = `Update images ({{len .Changes}} change{{if ne (len .Changes) 1}}s{{end}})

{{range .Changes}}- {{.File}}:{{.Line}}: {{.Image}}: {{.Old}} -> {{.New}} (ImagePolicy {{.Policy}})
{{end}}`

// DefaultAuthor is the commit author when the Sync sets none.
var DefaultAuthor = v1alpha1.CommitAuthor{Name: "driftless", Email: "driftless@localhost"}

// Request is one image update of a Sync.
type Request struct {
	// Source is the Sync's repository, branch and credentials.
	Source source.Request
	// Branch is where to push; empty is the Source's branch.
	Branch string
	// Paths are the Sync's paths.
	Paths []string
	// Commit says whether to commit and push (Commit mode) or only
	// report (Report mode).
	Commit bool
	Author v1alpha1.CommitAuthor
	// Message is a text/template over {{.Changes}}; empty is DefaultMessage.
	Message string
	// Dir is a scratch directory for the checkout; it is emptied first.
	Dir string
	// Mirror is the agent's git mirror, which the update fetches the
	// branch into and takes its checkout from (see source.Mirror.Base);
	// nil is a mirror of the update's own, beside Dir.
	Mirror *source.Mirror
	// Attempts is how many times a push that loses a race is retried
	// on the new head; 0 means 3.
	Attempts int
	// Now is the commit time; nil is time.Now.
	Now func() time.Time
	// SignKey, when set, signs the commits (see source.ParseSigningKey).
	SignKey *openpgp.Entity
	// FromBase (PullRequest mode) commits on top of the Source's branch,
	// the base, whatever Branch holds, and force-pushes Branch. When
	// Branch already holds the same change on the same base commit,
	// nothing is pushed and Outcome.Commit is Branch's tip.
	FromBase bool
}

// Outcome is what an update did.
type Outcome struct {
	setters.Result
	// Revision is the commit the changes were computed on.
	Revision string
	// Commit is the commit pushed, empty when nothing was.
	Commit string
	// Message is the commit message (also in Report mode: what would
	// be committed).
	Message string
	// Pushed says whether Commit was pushed now (FromBase: false when
	// the branch already held the same change).
	Pushed bool
}

// Run checks out the branch's tip from the mirror, rewrites and, in Commit
// mode, commits (signed with SignKey, if set) and pushes. Problems in files
// are in the outcome (those files are not changed); the error is for what
// stopped the update: the fetch, the signature of the tip, the push, the
// template.
func Run(ctx context.Context, req Request, lookup setters.Lookup) (Outcome, error) {
	if req.Source.Ref.Tag != "" || req.Source.Ref.Commit != "" {
		return Outcome{}, errors.New("image update needs a branch source: spec.source.git names a tag or a commit, which cannot be pushed to; set spec.source.git.branch or remove spec.imageUpdate")
	}
	branch := req.Branch
	if branch == "" {
		branch = req.Source.Ref.Branch
	}
	if branch == "" {
		branch = "master"
	}
	auth, err := req.Source.Credentials.AuthMethod(req.Source.URL)
	if err != nil {
		return Outcome{}, err
	}
	tmpl, err := template.New("message").Parse(orDefault(req.Message, DefaultMessage))
	if err != nil {
		return Outcome{}, fmt.Errorf("spec.imageUpdate.message is not a Go template: %w", err)
	}
	mirror := req.Mirror
	if mirror == nil {
		mirror = &source.Mirror{Dir: req.Dir + ".mirror"}
	}
	attempts := req.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	var lastErr error
	for range attempts {
		// Each attempt starts from the branch's tip as the mirror fetches
		// it: after a lost race, a change pushed meanwhile (by a person,
		// to the same file) is kept.
		repo, err := base(ctx, req, mirror, branch)
		if err != nil {
			return Outcome{}, err
		}
		out, err := apply(req, repo, tmpl, lookup)
		if err != nil || !req.Commit || len(out.Changes) == 0 {
			return out, err
		}
		head, err := repo.Head()
		if err != nil {
			return Outcome{}, err
		}
		refspec := fmt.Sprintf("%s:refs/heads/%s", head.Name(), branch)
		if req.FromBase {
			tip, err := sameChange(ctx, req, mirror, branch, repo, head.Hash())
			if err != nil {
				return Outcome{}, err
			}
			if tip != "" {
				out.Commit = tip
				return out, nil
			}
			refspec = "+" + refspec
		}
		err = repo.PushContext(ctx, &git.PushOptions{
			RemoteName: "origin",
			RemoteURL:  req.Source.URL,
			Auth:       auth,
			RefSpecs:   []config.RefSpec{config.RefSpec(refspec)},
		})
		if err == nil {
			out.Pushed = true
			return out, nil
		}
		// The server's reply may repeat what it was sent, credentials
		// included.
		lastErr = fmt.Errorf("push %s to branch %s of %s: %w", source.Short(out.Commit), branch, source.Redact(req.Source.URL), source.RedactError(err, req.Source))
		if !retryable(err) {
			return Outcome{}, lastErr
		}
	}
	return Outcome{}, fmt.Errorf("gave up after %d attempts: %w", attempts, lastErr)
}

// retryable reports whether a push error is a lost race, worth a fetch
// and a new attempt, rather than a refusal (rights, protection).
func retryable(err error) bool {
	if errors.Is(err, git.ErrNonFastForwardUpdate) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "non-fast-forward") || strings.Contains(msg, "fetch first")
}

// base checks out the tip of the push branch when it exists (updates
// accumulate on it), else of the Sync's branch to start it from. Either
// tip must pass the Sync's signature check: a signed robot commit must not
// vouch for an untrusted one beneath it, on the Sync's branch or on a
// push branch that is merged into it later.
func base(ctx context.Context, req Request, mirror *source.Mirror, branch string) (*git.Repository, error) {
	from := orDefault(req.Source.Ref.Branch, "master")
	branches := uniq(branch, from)
	if req.FromBase {
		branches = []string{from}
	}
	for _, b := range branches {
		r := source.Request{URL: req.Source.URL, Ref: source.Ref{Branch: b}, Credentials: req.Source.Credentials, Verify: req.Source.Verify}
		repo, err := mirror.Base(ctx, r, req.Dir, req.Paths)
		if err == nil {
			return repo, nil
		}
		var unverified *source.VerificationError
		if errors.As(err, &unverified) {
			return nil, fmt.Errorf("nothing committed on branch %s, whose tip the Sync would not apply (spec.source.git.verify): %w; "+
				"once a trusted commit is on top, the update goes on (sign the robot's commits with spec.imageUpdate.signingKey and trust its key)", b, err)
		}
		if !errors.Is(err, source.ErrNoBranch) {
			return nil, fmt.Errorf("check out branch %s of %s: %w", b, source.Redact(req.Source.URL), err)
		}
	}
	return nil, fmt.Errorf("neither branch %s nor %s exists in %s", branch, from, source.Redact(req.Source.URL))
}

// sameChange returns the tip of branch when it is already the change
// committed as commit in repo: the same tree on the same parent. It is
// "" when branch does not exist or holds anything else.
func sameChange(ctx context.Context, req Request, mirror *source.Mirror, branch string, repo *git.Repository, commit plumbing.Hash) (string, error) {
	// The robot's branch is only read here, not built on: its tip need
	// not pass the Sync's signature check.
	r := source.Request{URL: req.Source.URL, Ref: source.Ref{Branch: branch}, Credentials: req.Source.Credentials}
	theirs, err := mirror.Base(ctx, r, req.Dir+".head", req.Paths)
	if errors.Is(err, source.ErrNoBranch) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read branch %s of %s: %w", branch, source.Redact(req.Source.URL), err)
	}
	ref, err := theirs.Head()
	if err != nil {
		return "", err
	}
	tip, err := theirs.CommitObject(ref.Hash())
	if err != nil {
		return "", err
	}
	ours, err := repo.CommitObject(commit)
	if err != nil {
		return "", err
	}
	if tip.TreeHash != ours.TreeHash || !slices.Equal(tip.ParentHashes, ours.ParentHashes) {
		return "", nil
	}
	return tip.Hash.String(), nil
}

// apply rewrites the markers in the worktree and, in Commit mode, commits.
func apply(req Request, repo *git.Repository, tmpl *template.Template, lookup setters.Lookup) (Outcome, error) {
	head, err := repo.Head()
	if err != nil {
		return Outcome{}, err
	}
	res, err := setters.Update(setters.Options{Root: req.Dir, Paths: req.Paths, DryRun: !req.Commit}, lookup)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Result: res, Revision: head.Hash().String()}
	if len(res.Changes) == 0 {
		return out, nil
	}
	var msg bytes.Buffer
	if err := tmpl.Execute(&msg, struct{ Changes []v1alpha1.ImageChange }{res.Changes}); err != nil {
		return Outcome{}, fmt.Errorf("spec.imageUpdate.message: %w", err)
	}
	out.Message = msg.String()
	if !req.Commit {
		return out, nil
	}
	wt, err := repo.Worktree()
	if err != nil {
		return Outcome{}, err
	}
	for _, f := range res.Files {
		if _, err := wt.Add(f); err != nil {
			return Outcome{}, fmt.Errorf("stage %s: %w", f, err)
		}
	}
	author := req.Author
	if author.Name == "" {
		author.Name = DefaultAuthor.Name
	}
	if author.Email == "" {
		author.Email = DefaultAuthor.Email
	}
	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	sig := &object.Signature{Name: author.Name, Email: author.Email, When: now()}
	hash, err := wt.Commit(out.Message, &git.CommitOptions{Author: sig, Committer: sig, SignKey: req.SignKey})
	if err != nil {
		return Outcome{}, fmt.Errorf("commit: %w", err)
	}
	out.Commit = hash.String()
	return out, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}
