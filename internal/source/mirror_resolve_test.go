package source

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// Pollers that take any answer younger than their interval share one
// ls-remote per interval, however many they are, and still see a new
// commit within an interval of it.
func TestMirrorResolveSinceCostsOneLsRemotePerIntervalForAnyNumberOfPollers(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "first", map[string]string{"apps/a/app.yaml": "v: 1\n"})
	req := Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: sshCreds(srv)}
	m := &Mirror{Dir: t.TempDir()}

	const pollers, interval = 40, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	seen := make([]atomic.Value, pollers)
	start := time.Now()
	for i := range pollers {
		wg.Go(func() {
			// Each polls every interval, at a phase of its own, as the
			// health waits of Syncs that started at different times do.
			select {
			case <-ctx.Done():
			case <-time.After(interval * time.Duration(i) / pollers):
			}
			for ctx.Err() == nil {
				if rev, err := m.ResolveSince(ctx, req, time.Now().Add(-interval)); err == nil {
					seen[i].Store(rev)
				}
				select {
				case <-ctx.Done():
				case <-time.After(interval):
				}
			}
		})
	}
	second := ""
	deadline := time.Now().Add(time.Minute)
	for second == "" || !allSeen(seen, second) {
		if time.Now().After(deadline) {
			t.Fatal("the pollers did not all see the second commit within a minute")
		}
		if second == "" && allSeen(seen, first) {
			second = repo.Commit(t, "second", map[string]string{"apps/a/app.yaml": "v: 2\n"})
		}
		time.Sleep(interval / 4)
	}
	cancel()
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d pollers over %s: %d ls-remotes", pollers, elapsed.Round(time.Millisecond), m.Stats().Resolves)
	if got, budget := m.Stats().Resolves, int64(elapsed/interval)+1; got > budget {
		t.Errorf("%d pollers over %s ran %d ls-remotes; want at most one per %s (%d)", pollers, elapsed, got, interval, budget)
	}
}

func allSeen(seen []atomic.Value, revision string) bool {
	for i := range seen {
		if v, _ := seen[i].Load().(string); v != revision {
			return false
		}
	}
	return true
}
