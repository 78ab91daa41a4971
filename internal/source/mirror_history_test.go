package source

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

func TestBehindCountsTheCommitsSinceARevisionOfTheBranchThroughAShallowMirror(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	req := Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: sshCreds(srv)}
	m := &Mirror{Dir: t.TempDir()}
	ctx := context.Background()

	good := repo.Commit(t, "good", map[string]string{"app.yaml": "v: 1\n"})
	// The mirror fetches tips one commit deep: it holds good, not what
	// comes before or between.
	tr, err := m.Checkout(ctx, req, good)
	if err != nil {
		t.Fatal(err)
	}
	tr.Release()
	repo.Commit(t, "bad", map[string]string{"app.yaml": "v: 2\n"})
	repo.Commit(t, "worse", map[string]string{"app.yaml": "v: 3\n"})
	tip := repo.Commit(t, "worst", map[string]string{"app.yaml": "v: 4\n"})

	n, err := m.Behind(ctx, req, tip, good)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("Behind(tip, good) = %d, want the 3 commits after good", n)
	}
	if n, err := m.Behind(ctx, req, tip, tip); err != nil || n != 0 {
		t.Errorf("Behind(tip, tip) = %d, %v; want 0", n, err)
	}

	// A commit of another branch is not in main's history.
	repo.Checkout(t, "experiment")
	other := repo.Commit(t, "elsewhere", map[string]string{"app.yaml": "v: 5\n"})
	_, err = m.Behind(ctx, req, tip, other)
	if !errors.Is(err, ErrNotInHistory) {
		t.Fatalf("Behind(tip, a commit of another branch) = %v, want ErrNotInHistory", err)
	}
	for _, want := range []string{Short(other), "branch main", Short(tip)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	// A commit that exists nowhere is not either.
	if _, err := m.Behind(ctx, req, tip, strings.Repeat("0", 40)); !errors.Is(err, ErrNotInHistory) {
		t.Errorf("Behind(tip, an unknown commit) = %v, want ErrNotInHistory", err)
	}
}
