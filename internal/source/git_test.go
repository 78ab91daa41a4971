package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/driftless/driftless/internal/testenv"
)

func sshCreds(srv *testenv.GitServer) Credentials {
	return Credentials{Identity: srv.DeployKey, KnownHosts: srv.KnownHosts()}
}

func TestResolveAndCheckoutEveryRefKindOverEveryTransport(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.HTTPUser, srv.HTTPPassword = "ci", "tok-123456"
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	repo.Tag(t, "v1")
	second := repo.Commit(t, "second", map[string]string{"app.yaml": "v: 2\n"})

	transports := map[string]Request{
		"file": {URL: repo.FileURL()},
		"ssh":  {URL: repo.SSHURL(), Credentials: sshCreds(srv)},
		"http": {URL: repo.HTTPURL(), Credentials: Credentials{Token: "tok-123456", Username: "ci"}},
	}
	refs := []struct {
		ref      Ref
		revision string
		content  string
	}{
		{Ref{Branch: "main"}, second, "v: 2\n"},
		{Ref{Tag: "v1"}, first, "v: 1\n"},
		{Ref{Commit: first}, first, "v: 1\n"},
	}
	for name, base := range transports {
		for _, r := range refs {
			t.Run(name+" "+r.ref.String(), func(t *testing.T) {
				req := base
				req.Ref = r.ref
				rev, err := Resolve(context.Background(), req)
				if err != nil {
					t.Fatalf("resolve: %v", err)
				}
				if rev != r.revision {
					t.Errorf("resolved %s, want %s", rev, r.revision)
				}
				dir := filepath.Join(t.TempDir(), "checkout")
				got, err := Checkout(context.Background(), req, rev, dir)
				if err != nil {
					t.Fatalf("checkout: %v", err)
				}
				if got != r.revision {
					t.Errorf("checked out %s, want %s", got, r.revision)
				}
				if data, _ := os.ReadFile(filepath.Join(dir, "app.yaml")); string(data) != r.content {
					t.Errorf("app.yaml = %q, want %q", data, r.content)
				}
			})
		}
	}
}

func TestCheckoutReusesTheCachedRevision(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	rev := repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	req := Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: sshCreds(srv)}
	dir := filepath.Join(t.TempDir(), "checkout")
	if _, err := Checkout(context.Background(), req, rev, dir); err != nil {
		t.Fatal(err)
	}
	// With the server down, only a cache hit can succeed.
	srv.StopSSH()
	if _, err := Checkout(context.Background(), req, rev, dir); err != nil {
		t.Fatalf("second checkout of the same revision fetched again: %v", err)
	}
}

func TestSSHHostKeyIsVerified(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	impostor := testenv.NewGitServer(t)
	wrongKnownHosts := []byte(knownhosts.Line([]string{knownhosts.Normalize(srv.SSHAddr())}, impostor.HostKey) + "\n")
	otherHost := []byte(knownhosts.Line([]string{"[example.com]:22"}, srv.HostKey) + "\n")

	tests := []struct {
		name    string
		creds   Credentials
		wantErr string
	}{
		{"a wrong host key is refused", Credentials{Identity: srv.DeployKey, KnownHosts: wrongKnownHosts}, "does not match known_hosts"},
		{"an unknown host is refused", Credentials{Identity: srv.DeployKey, KnownHosts: otherHost}, "is not in known_hosts"},
		{"no known_hosts is refused", Credentials{Identity: srv.DeployKey}, "insecureSkipHostKeyCheck"},
		{"no deploy key is refused", Credentials{KnownHosts: srv.KnownHosts()}, "needs a deploy key"},
		{"insecure skips the check", Credentials{Identity: srv.DeployKey, InsecureSkipHostKeyCheck: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(context.Background(), Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: tt.creds})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("resolve: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("resolve error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestErrorsNeverContainCredentials(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.HTTPUser, srv.HTTPPassword = "ci", "right-token"
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})

	withUserinfo := strings.Replace(repo.HTTPURL(), "http://", "http://ci:url-secret-999@", 1)
	for _, req := range []Request{
		{URL: repo.HTTPURL(), Credentials: Credentials{Username: "ci", Password: "wrong-password-123"}},
		{URL: repo.HTTPURL(), Credentials: Credentials{Token: "wrong-token-456"}},
		{URL: withUserinfo},
	} {
		_, err := Resolve(context.Background(), req)
		if err == nil {
			t.Fatalf("resolve with wrong credentials succeeded")
		}
		for _, secret := range []string{"wrong-password-123", "wrong-token-456", "url-secret-999", "right-token"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error leaks a credential: %v", err)
			}
		}
	}
}

func TestUnreachableServerAndMissingRefSayWhatToCheck(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})

	_, err := Resolve(context.Background(), Request{URL: repo.FileURL(), Ref: Ref{Branch: "nope"}})
	if err == nil || !strings.Contains(err.Error(), "branch nope not found") {
		t.Errorf("missing branch error = %v", err)
	}
	srv.StopSSH()
	_, err = Resolve(context.Background(), Request{URL: repo.SSHURL(), Ref: Ref{Branch: "main"}, Credentials: sshCreds(srv)})
	if err == nil || !strings.Contains(err.Error(), "fetch ssh://") {
		t.Errorf("unreachable server error = %v", err)
	}
}

func TestRedactRemovesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pa55@example.com/r.git": "https://user:xxxxx@example.com/r.git",
		"https://example.com/r.git":           "https://example.com/r.git",
		"git@github.com:org/repo.git":         "git@github.com:org/repo.git",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactErrorMasksEveryFormOfTheCredentials(t *testing.T) {
	tests := []struct {
		name string
		req  Request
	}{
		{"a password in the URL", Request{URL: "https://robot:tok-secret-7@git.corp/org/fleet"}},
		{"a token as the URL's user name", Request{URL: "https://tok-secret-7@git.corp/org/fleet"}},
		{"a token in the credentials", Request{URL: "https://git.corp/org/fleet", Credentials: Credentials{Token: "tok-secret-7"}}},
		{"a password in the credentials", Request{URL: "https://git.corp/org/fleet", Credentials: Credentials{Username: "robot", Password: "tok-secret-7"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := errors.New("refused " + tt.req.URL + " with tok-secret-7")
			err := RedactError(fmt.Errorf("push: %w", inner), tt.req)
			if strings.Contains(err.Error(), "tok-secret-7") {
				t.Errorf("the error shows the credential: %v", err)
			}
			if !errors.Is(err, inner) {
				t.Error("the masked error no longer wraps the original")
			}
		})
	}
}
