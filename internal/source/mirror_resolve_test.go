package source

import (
	"context"
	"sync"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

func TestMirrorResolveSharesLsRemotesAmongConcurrentCallersAndNeverAnswersStale(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "first", map[string]string{"apps/a/app.yaml": "v: 1\n"})
	req := Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: sshCreds(srv)}
	m := &Mirror{Dir: t.TempDir()}

	const callers = 50
	var wg sync.WaitGroup
	revs := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { revs[i], errs[i] = m.Resolve(context.Background(), req) })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || revs[i] != first {
			t.Fatalf("caller %d: %s, %v; want %s", i, revs[i], errs[i], first)
		}
	}
	// The first caller starts one; those who ask meanwhile share the next.
	if got := m.Stats().Resolves; got >= callers/2 {
		t.Errorf("%d concurrent callers ran %d ls-remotes, want far fewer", callers, got)
	}

	// A caller that asks after a commit gets it, although the ls-remote
	// of the callers before it answered the older revision.
	second := repo.Commit(t, "second", map[string]string{"apps/a/app.yaml": "v: 2\n"})
	if got, err := m.Resolve(context.Background(), req); err != nil || got != second {
		t.Errorf("Resolve after a commit = %s, %v; want %s", got, err, second)
	}

	// Other credentials are another repository: no answer is shared.
	other := req
	other.Credentials = Credentials{}
	if _, err := m.Resolve(context.Background(), other); err == nil {
		t.Error("a caller without credentials got the answer of a caller with them")
	}
}
