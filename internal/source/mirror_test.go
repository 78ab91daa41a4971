package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

func readTreeFile(t *testing.T, tr Tree, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tr.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestMirrorFetchesARevisionOnceForEveryReader(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	rev := repo.Commit(t, "first", map[string]string{"apps/a/app.yaml": "v: 1\n", "apps/b/app.yaml": "v: 1\n"})
	req := Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: sshCreds(srv)}
	m := &Mirror{Dir: t.TempDir()}

	const readers = 50
	var wg sync.WaitGroup
	trees := make([]Tree, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Go(func() { trees[i], errs[i] = m.Checkout(context.Background(), req, rev) })
	}
	wg.Wait()
	for i := range readers {
		if errs[i] != nil {
			t.Fatalf("reader %d: %v", i, errs[i])
		}
		if got := readTreeFile(t, trees[i], "apps/b/app.yaml"); got != "v: 1\n" {
			t.Errorf("reader %d read %q", i, got)
		}
		trees[i].Release()
	}
	if got := m.Stats(); got.Fetches != 1 || got.Trees != 1 {
		t.Errorf("%d readers of one revision: %d fetches and %d trees, want 1 and 1", readers, got.Fetches, got.Trees)
	}

	// With the server down, the mirror still serves what it has.
	srv.StopSSH()
	tr, err := m.Checkout(context.Background(), req, rev)
	if err != nil {
		t.Fatalf("a revision the mirror has was fetched again: %v", err)
	}
	tr.Release()
}

func TestMirrorFetchesANewCommitAndKeepsTreesThatAreRead(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
	m := &Mirror{Dir: t.TempDir(), Keep: 1}
	ctx := context.Background()

	first := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	held, err := m.Checkout(ctx, req, first)
	if err != nil {
		t.Fatal(err)
	}
	var revs []string
	for i, v := range []string{"v: 2\n", "v: 3\n", "v: 4\n"} {
		rev := repo.Commit(t, "next", map[string]string{"app.yaml": v})
		tr, err := m.Checkout(ctx, req, rev)
		if err != nil {
			t.Fatalf("commit %d: %v", i+2, err)
		}
		if got := readTreeFile(t, tr, "app.yaml"); got != v {
			t.Errorf("commit %d: app.yaml = %q, want %q", i+2, got, v)
		}
		tr.Release()
		revs = append(revs, rev)
	}
	if got := m.Stats().Fetches; got != 4 {
		t.Errorf("4 commits took %d fetches, want 4", got)
	}
	// The first tree is still read: it stays, whatever Keep says.
	if got := readTreeFile(t, held, "app.yaml"); got != "v: 1\n" {
		t.Errorf("a held tree changed or went away: app.yaml = %q", got)
	}
	held.Release()
	// Released, it goes; so do the older idle trees, down to Keep.
	tr, err := m.Checkout(ctx, req, revs[2])
	if err != nil {
		t.Fatal(err)
	}
	tr.Release()
	for _, gone := range []string{first, revs[0], revs[1]} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(tr.Dir), gone)); !os.IsNotExist(err) {
			t.Errorf("the idle tree of %s was kept (stat: %v)", Short(gone), err)
		}
	}
	if _, err := os.Stat(tr.Dir); err != nil {
		t.Errorf("the newest tree was removed: %v", err)
	}
}

func TestMirrorChecksOutAResolvedRevisionAfterTheBranchMovedOn(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
	resolved := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	repo.Commit(t, "second", map[string]string{"app.yaml": "v: 2\n"})
	m := &Mirror{Dir: t.TempDir()}
	tr, err := m.Checkout(context.Background(), req, resolved)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Release()
	if got := readTreeFile(t, tr, "app.yaml"); got != "v: 1\n" {
		t.Errorf("app.yaml = %q, want the resolved revision's %q", got, "v: 1\n")
	}
}

func TestMirrorChecksOutTagsAndCommits(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	repo.Tag(t, "v1")
	repo.Commit(t, "second", map[string]string{"app.yaml": "v: 2\n"})
	m := &Mirror{Dir: t.TempDir()}
	for _, ref := range []Ref{{Tag: "v1"}, {Commit: first}} {
		t.Run(ref.String(), func(t *testing.T) {
			tr, err := m.Checkout(context.Background(), Request{URL: repo.FileURL(), Ref: ref}, first)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Release()
			if got := readTreeFile(t, tr, "app.yaml"); got != "v: 1\n" {
				t.Errorf("app.yaml = %q, want %q", got, "v: 1\n")
			}
		})
	}
}

func TestMirrorsAreSeparatePerCredentials(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.HTTPUser, srv.HTTPPassword = "ci", "tok-123456"
	repo := srv.NewRepo(t, "fleet")
	rev := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	m := &Mirror{Dir: t.TempDir()}
	good := Request{URL: repo.HTTPURL(), Ref: Ref{Branch: "main"}, Credentials: Credentials{Username: "ci", Token: "tok-123456"}}
	tr, err := m.Checkout(context.Background(), good, rev)
	if err != nil {
		t.Fatal(err)
	}
	tr.Release()

	// A reader without the credentials does not get the revision that
	// another reader's credentials fetched: it must fetch, and fails.
	bad := good
	bad.Credentials = Credentials{Username: "ci", Token: "wrong-token"}
	_, err = m.Checkout(context.Background(), bad, rev)
	if err == nil {
		t.Fatal("a reader with wrong credentials was served a revision fetched with the right ones")
	}
	for _, secret := range []string{"wrong-token", "tok-123456"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows a credential: %v", err)
		}
	}
	entries, _ := os.ReadDir(m.Dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "tok") {
			t.Errorf("a mirror directory is named after a credential: %s", e.Name())
		}
	}
}

func TestMirrorPathsDigestChangesOnlyWithThePaths(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
	m := &Mirror{Dir: t.TempDir()}
	digest := func(rev string, paths ...string) string {
		t.Helper()
		d, ok, err := m.PathsDigest(context.Background(), req, rev, paths)
		if err != nil || !ok {
			t.Fatalf("digest of %v at %s: %q, %v, %v", paths, Short(rev), d, ok, err)
		}
		return d
	}
	first := repo.Commit(t, "first", map[string]string{"apps/a/app.yaml": "v: 1\n", "apps/b/app.yaml": "v: 1\n", "root.yaml": "v: 1\n"})
	a := digest(first, "apps/a")
	other := repo.Commit(t, "b changes", map[string]string{"apps/b/app.yaml": "v: 2\n", "root.yaml": "v: 2\n"})
	if digest(other, "apps/a") != a {
		t.Error("a commit outside apps/a changed its digest")
	}
	if digest(other, "apps/b") == digest(first, "apps/b") {
		t.Error("a commit to apps/b left its digest as it was")
	}
	added := repo.Commit(t, "a gains a file", map[string]string{"apps/a/more.yaml": "v: 1\n"})
	if digest(added, "apps/a") == a {
		t.Error("a file added under apps/a left its digest as it was")
	}
	if digest(added, "apps/a", "apps/b") == digest(added, "apps/b", "apps/a") {
		t.Error("the digest does not tell the paths' order apart (the render's order follows it)")
	}
	if _, ok, err := m.PathsDigest(context.Background(), req, added, []string{"missing"}); ok || err != nil {
		t.Errorf("a missing path was digested (ok=%v, err=%v): the render fails on it, and a reuse must not hide that", ok, err)
	}

	// A symbolic link may lead anywhere in the repository: the digest
	// cannot tell, and says so.
	if err := os.Symlink("../../root.yaml", filepath.Join(repo.Work, "apps/a/link.yaml")); err != nil {
		t.Fatal(err)
	}
	linked := repo.Commit(t, "a links out", nil)
	if _, ok, err := m.PathsDigest(context.Background(), req, linked, []string{"apps/a"}); ok || err != nil {
		t.Errorf("a path holding a symbolic link was digested (ok=%v, err=%v)", ok, err)
	}
	if _, ok, _ := m.PathsDigest(context.Background(), req, linked, []string{"apps/b"}); !ok {
		t.Error("a path without symbolic links was not digested")
	}
	// A path under a symbolic link to a directory: the render follows it,
	// the git tree does not.
	if err := os.Symlink("apps/b", filepath.Join(repo.Work, "current")); err != nil {
		t.Fatal(err)
	}
	throughLink := repo.Commit(t, "current links to apps/b", nil)
	if _, ok, err := m.PathsDigest(context.Background(), req, throughLink, []string{"current/app.yaml"}); ok || err != nil {
		t.Errorf("a path through a symbolic link was digested (ok=%v, err=%v)", ok, err)
	}
}

// A token in the URL (https://user:token@host/…) is used to fetch and is
// not written into the mirror.
func TestTheMirrorDoesNotWriteATokenFromTheURL(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.HTTPUser, srv.HTTPPassword = "ci", "tok-123456"
	repo := srv.NewRepo(t, "fleet")
	rev := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	m := &Mirror{Dir: t.TempDir()}
	req := Request{URL: strings.Replace(repo.HTTPURL(), "://", "://ci:tok-123456@", 1), Ref: Ref{Branch: "main"}}
	tr, err := m.Checkout(context.Background(), req, rev)
	if err != nil {
		t.Fatalf("a URL holding its credentials did not fetch: %v", err)
	}
	tr.Release()
	err = filepath.WalkDir(m.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), "tok-123456") {
			t.Errorf("%s holds the token", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A reader whose context ends while it writes a tree fails alone: the
// next reader writes the tree again instead of getting that error.
func TestAFailedTreeWriteIsNotServedToTheNextReader(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	rev := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	req := Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: sshCreds(srv)}
	m := &Mirror{Dir: t.TempDir()}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Checkout(cancelled, req, rev); err == nil {
		t.Fatal("a reader with an ended context got a tree")
	}
	tr, err := m.Checkout(context.Background(), req, rev)
	if err != nil {
		t.Fatalf("the next reader got the failed write's error: %v", err)
	}
	defer tr.Release()
	if got := readTreeFile(t, tr, "app.yaml"); got != "v: 1\n" {
		t.Errorf("app.yaml = %q", got)
	}
}

func TestAnAnonymousReaderIsNotServedAPinnedCommitAnotherReadersCredentialsFetched(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.HTTPUser, srv.HTTPPassword = "ci", "tok-private-1"
	repo := srv.NewRepo(t, "private")
	rev := repo.Commit(t, "secret", map[string]string{"x/app.yaml": "v: private\n"})
	m := &Mirror{Dir: t.TempDir()}

	// Tenant A fetches the commit with its credentials: it is in a mirror.
	owner := Request{URL: repo.HTTPURL(), Credentials: Credentials{Username: "ci", Token: "tok-private-1"}}
	ref, got, err := ResolveName(context.Background(), owner, rev)
	if err != nil || got != rev {
		t.Fatalf("ResolveName for the owner = %s %v", got, err)
	}
	owner.Ref = ref
	tr, err := m.Checkout(context.Background(), owner, rev)
	if err != nil {
		t.Fatal(err)
	}
	tr.Release()

	// Tenant B names the same commit, pinned by hash (no request to
	// resolve it), with no credentials or with others: the mirror does not
	// serve it from A's objects.
	for _, creds := range []Credentials{{}, {Username: "ci", Token: "another-token"}} {
		reader := Request{URL: repo.HTTPURL(), Credentials: creds}
		ref, _, err := ResolveName(context.Background(), reader, rev)
		if err != nil {
			t.Fatal(err)
		}
		reader.Ref = ref
		tr, err := m.Checkout(context.Background(), reader, rev)
		if err == nil {
			tr.Release()
			t.Fatalf("a reader with credentials %q was served a commit fetched with another reader's", creds.Token)
		}
		if !strings.Contains(err.Error(), "authentication required") && !strings.Contains(err.Error(), "authorization failed") {
			t.Errorf("the refusal does not say authentication failed: %v", err)
		}
	}
}

// A mirror whose directory is removed under a running agent (a cleanup of
// the cache, a full disk emptied by hand), or whose repository is no
// longer readable, is cloned again: the next commit is checked out, and
// so is a revision whose tree went with the directory.
func TestAMirrorRemovedOrBrokenUnderTheAgentIsClonedAgain(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	req := Request{URL: repo.FileURL(), Ref: Ref{Branch: "main"}}
	m := &Mirror{Dir: t.TempDir()}
	ctx := context.Background()
	checkout := func(rev, want string) {
		t.Helper()
		tr, err := m.Checkout(ctx, req, rev)
		if err != nil {
			t.Fatalf("check out %s: %v", Short(rev), err)
		}
		defer tr.Release()
		if got := readTreeFile(t, tr, "app.yaml"); got != want {
			t.Errorf("%s: app.yaml = %q, want %q", Short(rev), got, want)
		}
	}
	first := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	checkout(first, "v: 1\n")

	entries, err := os.ReadDir(m.Dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("mirror directory %s: %v entries, %v; want one mirror", m.Dir, len(entries), err)
	}
	mirrorDir := filepath.Join(m.Dir, entries[0].Name())
	if err := os.RemoveAll(mirrorDir); err != nil {
		t.Fatal(err)
	}
	second := repo.Commit(t, "second", map[string]string{"app.yaml": "v: 2\n"})
	if rev, err := m.Resolve(ctx, req); err != nil || rev != second {
		t.Fatalf("resolve = %s, %v; want %s", rev, err, second)
	}
	checkout(second, "v: 2\n")
	checkout(first, "v: 1\n")

	// A repository that cannot be opened (its HEAD and config gone).
	for _, name := range []string{"HEAD", "config"} {
		if err := os.Remove(filepath.Join(mirrorDir, "git", name)); err != nil {
			t.Fatal(err)
		}
	}
	third := repo.Commit(t, "third", map[string]string{"app.yaml": "v: 3\n"})
	checkout(third, "v: 3\n")
}
