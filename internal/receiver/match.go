package receiver

import (
	"slices"
	"strings"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// Match returns the Syncs a push wakes, sorted by namespace and name: those
// whose spec.source.git.url names the pushed repository (the same
// source.RepositoryKey as one of the payload's addresses: host, port
// unless the default, and path; scheme, user, case, a trailing ".git" or
// "/" do not matter, so an HTTPS push notice wakes a Sync that fetches
// over SSH) and whose branch or tag is one of the pushed refs. A Sync
// pinned to a commit follows no ref and is never woken; a suspended Sync
// or one being deleted is left alone.
func Match(syncs []v1alpha1.Sync, p Push) []*v1alpha1.Sync {
	repos := map[string]bool{}
	for _, u := range p.Repositories {
		if key, ok := source.RepositoryKey(u); ok {
			repos[key] = true
		}
	}
	refs := map[string]bool{}
	for _, r := range p.Refs {
		refs[r] = true
	}
	var woken []*v1alpha1.Sync
	for i := range syncs {
		s := &syncs[i]
		if s.Spec.Suspend || !s.DeletionTimestamp.IsZero() {
			continue
		}
		if wakes(s.Spec.Source, p, repos, refs) {
			woken = append(woken, s)
		}
	}
	slices.SortFunc(woken, func(a, b *v1alpha1.Sync) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return woken
}

// wakes reports whether the push p names src, by its kind: an OCI
// source's artifact, or a git source's repository (a key of repos) and
// the ref it follows (a key of refs).
func wakes(src v1alpha1.Source, p Push, repos, refs map[string]bool) bool {
	switch src.Kind() {
	case v1alpha1.SourceOCI:
		return slices.ContainsFunc(p.Artifacts, func(a Artifact) bool { return matchesArtifact(src.OCI, a) })
	default: // v1alpha1.SourceGit
		git := src.Git
		ref := source.Ref{Branch: git.Branch, Tag: git.Tag, Commit: git.Commit}.RefName()
		if ref == "" || !refs[ref] {
			return false
		}
		key, ok := source.RepositoryKey(git.URL)
		return ok && repos[key]
	}
}
