package source

import (
	"context"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

func TestProtocolAcceptsEveryAddressFormGitUnderstands(t *testing.T) {
	tests := []struct {
		name, url, want string
	}{
		{"an HTTPS URL", "https://github.com/example/fleet.git", ProtocolHTTPS},
		{"an HTTPS URL without .git", "https://gitlab.example.com/group/sub/fleet", ProtocolHTTPS},
		{"an HTTPS URL with a user and password", "https://me:s3cret@github.com/example/fleet.git", ProtocolHTTPS},
		{"an HTTPS URL with a scheme in capitals", "HTTPS://github.com/example/fleet.git", ProtocolHTTPS},
		{"an HTTP URL with a port", "http://127.0.0.1:8080/fleet.git", ProtocolHTTP},
		{"an HTTPS URL to an IPv6 host", "https://[::1]:8443/fleet.git", ProtocolHTTPS},
		{"an SSH URL", "ssh://git@github.com/example/fleet.git", ProtocolSSH},
		{"an SSH URL with a port", "ssh://git@git.example.com:2222/example/fleet.git", ProtocolSSH},
		{"an scp-like address", "git@github.com:example/fleet.git", ProtocolSSH},
		{"an scp-like address without a user", "github.com:example/fleet.git", ProtocolSSH},
		{"a git:// URL", "git://git.example.com/fleet.git", ProtocolGit},
		{"a file URL", "file:///srv/git/fleet.git", ProtocolFile},
		{"a file URL on localhost", "file://localhost/srv/git/fleet.git", ProtocolFile},
		{"an absolute local path", "/srv/git/fleet.git", ProtocolFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Protocol(tt.url)
			if err != nil {
				t.Fatalf("Protocol(%q) refused it: %v", tt.url, err)
			}
			if got != tt.want {
				t.Errorf("Protocol(%q) = %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestProtocolRefusesMalformedAddressesSayingWhatToWrite(t *testing.T) {
	tests := []struct {
		name, url string
		want      []string // all in the error
	}{
		{"an empty address", "", []string{"is empty"}},
		{"a URL with a trailing space", "https://github.com/example/fleet.git ", []string{"whitespace"}},
		{"a URL missing the colon of its scheme", "https//github.com/example/fleet.git", []string{"neither a URL", "https://<host>/<org>/<repo>.git"}},
		{"a host and path without a scheme", "github.com/example/fleet.git", []string{"neither a URL", "scp-like"}},
		{"a relative path", "repos/fleet.git", []string{"relative to the agent's working directory is not supported"}},
		{"a URL missing a slash after its scheme", "https:/github.com/example/fleet.git", []string{`malformed "https:"`, "https://<host>"}},
		{"an unsupported scheme", "ftp://example.com/fleet.git", []string{`unsupported scheme "ftp"`, "ssh://, https://"}},
		{"a scheme git does not know", "git+ssh://git@github.com/example/fleet.git", []string{`unsupported scheme "git+ssh"`}},
		{"a URL without a host", "https:///example/fleet.git", []string{"has no host", "https://<host>/<org>/<repo>.git"}},
		{"a URL without a repository", "https://github.com", []string{"names no repository", "https://github.com/<org>/<repo>.git"}},
		{"a URL whose path is only a slash", "ssh://git@github.com/", []string{"names no repository"}},
		{"a port out of range", "ssh://git@github.com:99999/example/fleet.git", []string{`port "99999"`}},
		{"a space in the host name", "https://git hub.com/example/fleet.git", []string{"not a valid URL"}},
		{"a file URL with two slashes", "file://srv/git/fleet.git", []string{`host "srv"`, "three slashes"}},
		{"a file URL without a path", "file://", []string{"without a path"}},
		{"an scp-like address without a repository", "git@github.com:", []string{"neither a URL"}},
		{"an scp-like address whose path is a slash", "git@github.com:/", []string{"names no repository"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Protocol(tt.url)
			if err == nil {
				t.Fatalf("Protocol(%q) = %q, want it refused", tt.url, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestProtocolErrorsNeverRepeatAPassword(t *testing.T) {
	for _, url := range []string{
		"https://me:s3cret-token@git hub.com/example/fleet.git",
		"https://me:s3cret-token@github.com",
		"ftp://me:s3cret-token@example.com/fleet.git",
		"https://me:s3cret-token@github.com:99999/fleet.git",
	} {
		_, err := Protocol(url)
		if err == nil {
			t.Fatalf("Protocol(%q) accepted it; the test needs a refusal", Redact(url))
		}
		if strings.Contains(err.Error(), "s3cret-token") {
			t.Errorf("the error for %s repeats the password: %v", Redact(url), err)
		}
	}
}

// The addresses of a real git server, over every transport, are accepted
// and resolve: the check refuses nothing that works.
func TestProtocolAcceptsTheAddressesThatResolve(t *testing.T) {
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "first", map[string]string{"app.yaml": "v: 1\n"})
	for _, req := range []Request{
		{URL: repo.FileURL()},
		{URL: strings.TrimPrefix(repo.FileURL(), "file://")},
		{URL: repo.SSHURL(), Credentials: sshCreds(srv)},
		{URL: repo.HTTPURL()},
	} {
		if _, err := Protocol(req.URL); err != nil {
			t.Errorf("Protocol(%q) refused it: %v", req.URL, err)
		}
		req.Ref = Ref{Branch: "main"}
		if _, err := Resolve(context.Background(), req); err != nil {
			t.Errorf("resolve %s: %v", req.URL, err)
		}
	}
}

func TestCheckRefRefusesNamesGitCannotHold(t *testing.T) {
	tests := []struct {
		name  string
		ref   Ref
		valid bool
	}{
		{"no ref (the default branch)", Ref{}, true},
		{"a branch with slashes", Ref{Branch: "release/v1.2"}, true},
		{"a tag", Ref{Tag: "v1.2.3"}, true},
		{"a commit", Ref{Commit: "0123456789abcdef0123456789abcdef01234567"}, true},
		{"a branch with a space", Ref{Branch: "my branch"}, false},
		{"a branch with two dots", Ref{Branch: "main..dev"}, false},
		{"a branch ending in .lock", Ref{Branch: "main.lock"}, false},
		{"a branch beginning with a dash", Ref{Branch: "-main"}, false},
		{"a tag with a colon", Ref{Tag: "v1:2"}, false},
		{"a tag with a caret", Ref{Tag: "v1^"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRef(tt.ref)
			if (err == nil) != tt.valid {
				t.Errorf("CheckRef(%+v) = %v, want valid=%v", tt.ref, err, tt.valid)
			}
		})
	}
}
