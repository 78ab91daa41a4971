package update

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/setters"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/testenv"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 1 # scaled by hand
  template:
    spec:
      containers:
      - name: app
        image: registry.example.com/app:1.0.0 # {"$imagepolicy": "team:app"}
`

// lookup answers from a fixed selection; before, when set, runs once at
// the first question (between the clone and the push).
type lookup struct {
	latest setters.Latest
	once   sync.Once
	before func()
}

func (l *lookup) Policy(ns, name string) (setters.Latest, error) {
	if l.before != nil {
		l.once.Do(l.before)
	}
	if ns+"/"+name != "team/app" {
		return setters.Latest{}, fmt.Errorf("%s/%s: %w", ns, name, setters.ErrNoPolicy)
	}
	return l.latest, nil
}

func (l *lookup) Implied(setters.Implied) (setters.Latest, error) {
	return setters.Latest{}, fmt.Errorf("no implied policies here")
}

func newRepo(t *testing.T) (*testenv.GitServer, *testenv.Repo, Request) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Checkout(t, "main")
	repo.Commit(t, "add app", map[string]string{"apps/app.yaml": deployment, "README.md": "fleet\n"})
	req := Request{
		Source: source.Request{URL: repo.SSHURL(), Ref: source.Ref{Branch: "main"},
			Credentials: source.Credentials{Identity: srv.DeployKey, KnownHosts: srv.KnownHosts()}},
		Paths:  []string{"apps"},
		Commit: true,
		Author: v1alpha1.CommitAuthor{Name: "Image Bot", Email: "bot@example.com"},
		Dir:    filepath.Join(t.TempDir(), "clone"),
		Now:    func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	}
	return srv, repo, req
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := testenv.GitCommand(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestCommitModePushesOneCommitListingTheChange(t *testing.T) {
	_, repo, req := newRepo(t)
	before := gitOut(t, repo.Bare, "rev-parse", "main")
	out, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	head := gitOut(t, repo.Bare, "rev-parse", "main")
	if head == before || head != out.Commit {
		t.Fatalf("server's main is %s (was %s), want the pushed commit %s", head, before, out.Commit)
	}
	if author := gitOut(t, repo.Bare, "log", "-1", "--format=%an <%ae>", "main"); author != "Image Bot <bot@example.com>" {
		t.Errorf("author %q, want the configured one", author)
	}
	msg := gitOut(t, repo.Bare, "log", "-1", "--format=%B", "main")
	for _, want := range []string{"apps/app.yaml:11", "1.0.0 -> registry.example.com/app:1.2.3", "ImagePolicy team/app"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	got := gitOut(t, repo.Bare, "show", "main:apps/app.yaml")
	want := strings.Replace(deployment, "app:1.0.0", "app:1.2.3", 1)
	if got+"\n" != want {
		t.Errorf("file after the commit:\n%s\nwant only the tag changed:\n%s", got, want)
	}

	// Nothing left to change: nothing is committed.
	again, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Commit != "" || gitOut(t, repo.Bare, "rev-parse", "main") != head {
		t.Errorf("a second run with nothing to change committed %q", again.Commit)
	}
}

// A commit signed with the Sync's key verifies, on the server's branch,
// with its public key, as spec.source.git.verify checks a revision before
// it is applied; the same revision refuses a verifier that trusts
// another key.
func TestCommitModeSignsTheCommitWithTheSigningKey(t *testing.T) {
	_, repo, req := newRepo(t)
	robot := testenv.NewOpenPGPKey(t, "Image Bot", "bot@example.com", "")
	key, err := source.ParseSigningKey("team/bot", map[string][]byte{source.SigningKeyEntry: []byte(robot.ArmoredPrivate)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req.SignKey = key
	out, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if head := gitOut(t, repo.Bare, "rev-parse", "main"); head != out.Commit {
		t.Fatalf("server's main is %s, want the pushed commit %s", head, out.Commit)
	}
	checkout := func(trusted string) error {
		keys, err := source.ParseTrustedKeys("trusted", map[string][]byte{"bot.asc": []byte(trusted)})
		if err != nil {
			t.Fatal(err)
		}
		verified := req.Source
		verified.Verify = &source.Verification{Mode: source.VerifyHEAD, Keys: keys}
		tree, err := (&source.Mirror{Dir: t.TempDir()}).Checkout(context.Background(), verified, out.Commit)
		tree.Release()
		return err
	}
	if err := checkout(robot.ArmoredPublic); err != nil {
		t.Errorf("the pushed commit does not verify with the signing key's public key: %v", err)
	}
	other := testenv.NewOpenPGPKey(t, "Someone Else", "else@example.com", "")
	if err := checkout(other.ArmoredPublic); err == nil || !strings.Contains(err.Error(), "OpenPGP key "+robot.ID+", which is not trusted") {
		t.Errorf("verified with another key: %v, want the robot's key %s named as not trusted", err, robot.ID)
	}
}

// The update takes its checkout from the agent's mirror, which the Syncs
// of the repository share: one fetch of the branch's tip into the mirror,
// and a checkout of that tip alone, without the repository's history.
func TestTheUpdateStartsFromTheSharedMirrorWithoutTheHistory(t *testing.T) {
	_, repo, req := newRepo(t)
	for i := range 20 {
		repo.Commit(t, fmt.Sprintf("history %d", i), map[string]string{"README.md": fmt.Sprintf("fleet %d\n", i)})
	}
	req.Mirror = &source.Mirror{Dir: t.TempDir()}
	out, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if head := gitOut(t, repo.Bare, "rev-parse", "main"); head != out.Commit {
		t.Fatalf("server's main is %s, want the pushed commit %s", head, out.Commit)
	}
	if n := gitOut(t, req.Dir, "rev-list", "--count", "HEAD"); n != "2" {
		t.Errorf("the update's checkout holds %s commits, want 2 (the tip and the image commit), not the history", n)
	}
	if f := req.Mirror.Stats().Fetches; f != 1 {
		t.Errorf("the mirror fetched %d times, want once", f)
	}
	if got := gitOut(t, repo.Bare, "rev-list", "--count", "main"); got != "22" {
		t.Errorf("main holds %s commits after the push, want 22: the history is intact", got)
	}
	// Only the Sync's paths are written out; the commit keeps the rest.
	if _, err := os.Stat(filepath.Join(req.Dir, "README.md")); !os.IsNotExist(err) {
		t.Errorf("README.md, outside the Sync's paths, was written to the checkout (stat: %v)", err)
	}
	if got := gitOut(t, repo.Bare, "show", "main:README.md"); got != "fleet 19" {
		t.Errorf("README.md on main after the image commit: %q, want it unchanged", got)
	}
	if got := gitOut(t, repo.Bare, "diff", "--name-only", "main^", "main"); got != "apps/app.yaml" {
		t.Errorf("the image commit changes %q, want apps/app.yaml alone", got)
	}
}

// When the Sync verifies signatures, the update refuses to build on a tip
// that is not signed by a trusted key: its own commit, signed or not,
// would otherwise carry an untrusted change into the cluster.
func TestTheUpdateDoesNotBuildOnAnUnverifiedTip(t *testing.T) {
	_, repo, req := newRepo(t)
	before := gitOut(t, repo.Bare, "rev-parse", "main")
	trusted := testenv.NewOpenPGPKey(t, "Someone", "someone@example.com", "")
	keys, err := source.ParseTrustedKeys("trusted", map[string][]byte{"someone.asc": []byte(trusted.ArmoredPublic)})
	if err != nil {
		t.Fatal(err)
	}
	req.Source.Verify = &source.Verification{Mode: source.VerifyHEAD, Keys: keys}
	_, err = Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err == nil || !strings.Contains(err.Error(), "nothing committed on branch main, whose tip the Sync would not apply (spec.source.git.verify): commit "+before[:7]+" is not signed") {
		t.Fatalf("Run: %v, want the unsigned tip %s refused", err, before[:7])
	}
	if after := gitOut(t, repo.Bare, "rev-parse", "main"); after != before {
		t.Errorf("main moved to %s", after)
	}
}

func TestTheUpdateDoesNotBuildOnAnUnverifiedTipOfThePushBranch(t *testing.T) {
	_, repo, req := newRepo(t)
	signer := testenv.NewSSHSigningKey(t)
	repo.SignedCommit(t, signer, "signed", map[string]string{"README.md": "signed\n"})
	keys, err := source.ParseTrustedKeys("trusted", map[string][]byte{source.AllowedSignersKey: []byte(signer.AllowedSigner + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	req.Source.Verify = &source.Verification{Mode: source.VerifyHEAD, Keys: keys}
	// The push branch exists, with an unsigned commit on top.
	repo.Checkout(t, "image-updates")
	unsigned := repo.Commit(t, "unsigned", map[string]string{"README.md": "not signed\n"})
	req.Branch = "image-updates"
	_, err = Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err == nil || !strings.Contains(err.Error(), "nothing committed on branch image-updates") || !strings.Contains(err.Error(), unsigned[:7]) {
		t.Fatalf("Run: %v, want the unsigned tip %s of image-updates refused", err, unsigned[:7])
	}
	if after := gitOut(t, repo.Bare, "rev-parse", "image-updates"); after != unsigned {
		t.Errorf("image-updates moved to %s", after)
	}
}

func TestReportModePushesNothing(t *testing.T) {
	_, repo, req := newRepo(t)
	req.Commit = false
	before := gitOut(t, repo.Bare, "rev-parse", "main")
	out, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Changes) != 1 || out.Changes[0].New != "registry.example.com/app:1.2.3" || out.Commit != "" {
		t.Errorf("outcome %+v, want the one change reported and no commit", out)
	}
	if !strings.Contains(out.Message, "ImagePolicy team/app") {
		t.Errorf("report message %q does not say what would be committed", out.Message)
	}
	if after := gitOut(t, repo.Bare, "rev-parse", "main"); after != before {
		t.Errorf("report mode moved main from %s to %s", before, after)
	}
}

func TestAPushThatLosesARaceIsReappliedOnTheNewHeadKeepingTheHumansChange(t *testing.T) {
	_, repo, req := newRepo(t)
	l := &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}}
	l.before = func() { // a person pushes to the same file after our clone
		repo.Commit(t, "scale up", map[string]string{"apps/app.yaml": strings.Replace(deployment, "replicas: 1", "replicas: 3", 1)})
	}
	out, err := Run(context.Background(), req, l)
	if err != nil {
		t.Fatal(err)
	}
	got := gitOut(t, repo.Bare, "show", "main:apps/app.yaml")
	if !strings.Contains(got, "replicas: 3 # scaled by hand") || !strings.Contains(got, "app:1.2.3") {
		t.Errorf("file on main:\n%s\nwant the human's replicas: 3 and the new tag", got)
	}
	if parent := gitOut(t, repo.Bare, "log", "-1", "--format=%s", out.Commit+"^"); parent != "scale up" {
		t.Errorf("the image commit's parent is %q, want the human's commit", parent)
	}
}

func TestARefusedPushIsAClearErrorAndNotRetried(t *testing.T) {
	_, repo, req := newRepo(t)
	hook := filepath.Join(repo.Bare, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'robots may not push here' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := gitOut(t, repo.Bare, "rev-parse", "main")
	_, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err == nil || !strings.Contains(err.Error(), "push") || !strings.Contains(err.Error(), "branch main") {
		t.Fatalf("error = %v, want one saying the push to branch main failed", err)
	}
	if strings.Contains(err.Error(), "gave up after") {
		t.Errorf("a refusal was retried: %v", err)
	}
	if after := gitOut(t, repo.Bare, "rev-parse", "main"); after != before {
		t.Errorf("main moved to %s", after)
	}
}

func TestPushingToAnotherBranchLeavesTheSyncsBranchAlone(t *testing.T) {
	_, repo, req := newRepo(t)
	req.Branch = "image-updates"
	before := gitOut(t, repo.Bare, "rev-parse", "main")
	out, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, repo.Bare, "rev-parse", "image-updates"); got != out.Commit {
		t.Errorf("image-updates is %s, want %s", got, out.Commit)
	}
	if after := gitOut(t, repo.Bare, "rev-parse", "main"); after != before {
		t.Errorf("main moved to %s", after)
	}
}

func TestATagSourceCannotBeUpdated(t *testing.T) {
	_, _, req := newRepo(t)
	req.Source.Ref = source.Ref{Tag: "v1"}
	if _, err := Run(context.Background(), req, &lookup{}); err == nil || !strings.Contains(err.Error(), "branch") {
		t.Errorf("error = %v, want one asking for a branch source", err)
	}
}

func TestAFailedPushDoesNotShowTheCredentials(t *testing.T) {
	srv, repo, _ := newRepo(t)
	srv.HTTPUser, srv.HTTPPassword = "robot", "push-tok-secret-42"
	// A proxy in front of the server passes fetches on and refuses pushes
	// with a message that repeats what the client sent, as some do.
	upstream, err := url.Parse(strings.TrimSuffix(repo.HTTPURL(), "/fleet.git"))
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(upstream)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.String(), "receive-pack") {
			user, password, _ := r.BasicAuth()
			http.Error(w, fmt.Sprintf("pushes are closed; you sent %s:%s", user, password), http.StatusForbidden)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	address := proxy.URL + "/fleet.git"
	for _, tt := range []struct {
		name string
		req  source.Request
	}{
		{"credentials in the URL", source.Request{URL: strings.Replace(address, "http://", "http://robot:push-tok-secret-42@", 1)}},
		{"a token in the credentials", source.Request{URL: address, Credentials: source.Credentials{Username: "robot", Token: "push-tok-secret-42"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, req := newRepo(t)
			req.Source = tt.req
			req.Source.Ref = source.Ref{Branch: "main"}
			_, err := Run(context.Background(), req, &lookup{latest: setters.Latest{Image: "registry.example.com/app", Tag: "1.2.3"}})
			if err == nil || !strings.Contains(err.Error(), "pushes are closed") {
				t.Fatalf("error = %v, want the proxy's refusal", err)
			}
			if strings.Contains(err.Error(), "push-tok-secret-42") {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}
