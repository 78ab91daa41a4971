package source

import (
	"context"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

func TestResolveNameFindsTagsBranchesAndTheDefaultBranch(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "bases")
	first := repo.Commit(t, "first", map[string]string{"a.yaml": "v: 1\n"})
	repo.Tag(t, "v1")
	second := repo.Commit(t, "second", map[string]string{"a.yaml": "v: 2\n"})
	repo.Checkout(t, "v1") // a branch with a tag's name: the tag wins, as in git
	repo.Commit(t, "third", map[string]string{"a.yaml": "v: 3\n"})

	tests := []struct {
		name     string
		ref      string
		want     Ref
		revision string
	}{
		{"a tag is pinned to its commit", "v1", Ref{Tag: "v1"}, first},
		{"a branch is followed", "main", Ref{Branch: "main"}, second},
		{"no ref is the default branch", "", Ref{Branch: "main"}, second},
		{"a commit is itself", first, Ref{Commit: first}, first},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, rev, err := ResolveName(context.Background(), Request{URL: repo.HTTPURL()}, tt.ref)
			if err != nil || ref != tt.want || rev != tt.revision {
				t.Errorf("ResolveName(%q) = %+v %s %v, want %+v %s", tt.ref, ref, Short(rev), err, tt.want, Short(tt.revision))
			}
		})
	}

	_, _, err := ResolveName(context.Background(), Request{URL: repo.HTTPURL()}, "v9")
	if err == nil || !strings.Contains(err.Error(), `ref "v9" is neither a tag nor a branch of `+repo.HTTPURL()) {
		t.Errorf("a missing ref: error = %v", err)
	}
}

func TestHostIgnoresSchemeUserAndPort(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{"ssh://git@Git.Example.com:2222/org/a.git", "https://git.example.com/org/b.git"},
		{"git@git.example.com:org/a.git", "https://token@git.example.com/org/b"},
	} {
		if Host(tt.a) == "" || Host(tt.a) != Host(tt.b) {
			t.Errorf("Host(%q) = %q, Host(%q) = %q: want the same host", tt.a, Host(tt.a), tt.b, Host(tt.b))
		}
	}
	if Host("file:///srv/git/a.git") != "" {
		t.Error("a file:// URL has a host")
	}
}
