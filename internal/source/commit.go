package source

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Commit is what a commit says about itself.
type Commit struct {
	// Subject is the first line of the message.
	Subject string
	// Author is the author's name.
	Author string
}

// CommitOf reads the commit revision in dir, a checkout made by Checkout
// (a shallow clone has the commit it checked out). Subject is cut to
// maxSubject characters, with "…" at the end.
func CommitOf(dir, revision string, maxSubject int) (Commit, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return Commit{}, fmt.Errorf("open the checkout of %s: %w", Short(revision), err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(revision))
	if err != nil {
		return Commit{}, fmt.Errorf("read commit %s: %w", Short(revision), err)
	}
	return describe(c, maxSubject), nil
}

// Commit reads what the commit revision of req says about itself, if the
// mirror holds it (it does once Checkout or PathsDigest fetched it); it
// fetches nothing.
func (m *Mirror) Commit(req Request, revision string, maxSubject int) (Commit, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		return Commit{}, notGit(req)
	}
	r, err := m.repo(req)
	if err != nil {
		return Commit{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.repo.CommitObject(plumbing.NewHash(revision))
	if err != nil {
		return Commit{}, fmt.Errorf("read commit %s: %w", Short(revision), err)
	}
	return describe(c, maxSubject), nil
}

func describe(c *object.Commit, maxSubject int) Commit {
	subject, _, _ := strings.Cut(strings.TrimSpace(c.Message), "\n")
	subject = strings.TrimSpace(subject)
	if utf8.RuneCountInString(subject) > maxSubject {
		subject = string([]rune(subject)[:maxSubject-1]) + "…"
	}
	return Commit{Subject: subject, Author: c.Author.Name}
}
