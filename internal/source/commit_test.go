package source

import (
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func TestCommitOfReadsTheSubjectLineAndAuthorAndBoundsTheSubject(t *testing.T) {
	tests := []struct {
		name, message, want string
	}{
		{name: "the first line of a message with a body", message: "fix the web replicas\n\nBecause the HPA.", want: "fix the web replicas"},
		{name: "a subject longer than the bound is cut with an ellipsis", message: strings.Repeat("é", 30), want: strings.Repeat("é", 19) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			repo, err := git.PlainInit(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			wt, err := repo.Worktree()
			if err != nil {
				t.Fatal(err)
			}
			hash, err := wt.Commit(tt.message, &git.CommitOptions{AllowEmptyCommits: true,
				Author: &object.Signature{Name: "Jane Doe", Email: "jane@example.com", When: time.Now()}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := CommitOf(dir, hash.String(), 20)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Commit{Subject: tt.want, Author: "Jane Doe"}); got != want {
				t.Errorf("CommitOf = %+v, want %+v", got, want)
			}
		})
	}
}
