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

func TestCredentialsGoOnlyToTheSameServerOverAProtectedProtocol(t *testing.T) {
	tests := []struct {
		name       string
		own, other string
		want       bool
	}{
		{"another repository on the same https server", "https://git.corp/org/fleet", "https://git.corp/a/base.git", true},
		{"the default https port written out", "https://git.corp/org/fleet", "https://Git.Corp:443/a/base", true},
		{"a token in the base's own URL does not matter", "https://git.corp/org/fleet", "https://u:tok@git.corp/a/base", true},
		{"another repository on the same ssh server", "ssh://git@git.corp:2222/org/fleet", "ssh://git@git.corp:2222/a/base", true},
		{"scp-like and ssh:// on port 22", "git@git.corp:org/fleet.git", "ssh://git@git.corp/a/base.git", true},
		{"http:// would send the token in the clear", "https://git.corp/org/fleet", "http://git.corp/a/base", false},
		{"a Sync over http:// shares its token with nothing", "http://git.corp/org/fleet", "http://git.corp/a/base", false},
		{"another port may be another service", "https://git.corp/org/fleet", "https://git.corp:8080/a/base", false},
		{"another ssh port", "ssh://git@git.corp:2222/org/fleet", "ssh://git@git.corp/a/base", false},
		{"a token is not an ssh key", "https://git.corp/org/fleet", "ssh://git@git.corp/a/base", false},
		{"an ssh key is not a token", "git@git.corp:org/fleet.git", "https://git.corp/a/base", false},
		{"another host", "https://git.corp/org/fleet", "https://git.corp.evil.example/a/base", false},
		{"a file:// repository has no server", "file:///srv/git/fleet.git", "file:///srv/git/base.git", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SharesCredentials(tt.own, tt.other); got != tt.want {
				t.Errorf("SharesCredentials(%q, %q) = %v, want %v", tt.own, tt.other, got, tt.want)
			}
		})
	}
}
