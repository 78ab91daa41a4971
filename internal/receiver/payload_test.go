package receiver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readPayload(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParsersReadTheProvidersDocumentedPushPayloads(t *testing.T) {
	tests := []struct {
		name  string
		parse func([]byte) (Push, error)
		file  string
		want  Push
	}{
		{"a GitHub push", parseGitHub, "github-push.json", Push{
			Repositories: []string{
				"https://git.example.com/platform/fleet.git", "git@git.example.com:platform/fleet.git",
				"https://git.example.com/platform/fleet", "git://git.example.com/platform/fleet.git", "https://git.example.com/platform/fleet",
			},
			Refs: []string{"refs/heads/main"},
		}},
		{"a Gitea push", parseGitHub, "gitea-push.json", Push{
			Repositories: []string{
				"https://git.example.com/platform/fleet.git", "ssh://git@git.example.com:2222/platform/fleet.git",
				"https://git.example.com/platform/fleet",
			},
			Refs: []string{"refs/heads/main"},
		}},
		{"a GitLab push", parseGitLab, "gitlab-push.json", Push{
			Repositories: []string{
				"https://git.example.com/platform/fleet.git", "git@git.example.com:platform/fleet.git", "https://git.example.com/platform/fleet",
				"https://git.example.com/platform/fleet.git", "git@git.example.com:platform/fleet.git", "https://git.example.com/platform/fleet",
			},
			Refs: []string{"refs/heads/main"},
		}},
		{"a GitLab tag push", parseGitLab, "gitlab-tag-push.json", Push{
			Repositories: []string{
				"https://git.example.com/platform/fleet.git", "git@git.example.com:platform/fleet.git", "https://git.example.com/platform/fleet",
				"https://git.example.com/platform/fleet.git", "git@git.example.com:platform/fleet.git", "https://git.example.com/platform/fleet",
			},
			Refs: []string{"refs/tags/v1.0.0"},
		}},
		{"a Bitbucket Server push of a branch and a tag", parseBitbucket, "bitbucket-refs-changed.json", Push{
			Repositories: []string{"ssh://git@git.example.com:7999/platform/fleet.git", "https://git.example.com/scm/platform/fleet.git"},
			Refs:         []string{"refs/heads/main", "refs/tags/v1.0.0"},
		}},
		{"a generic push", parseGeneric, "generic.json", Push{
			Repositories: []string{"https://git.example.com/platform/fleet.git"},
			Refs:         []string{"refs/heads/main"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse(readPayload(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("push (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsersSayWhatAPayloadLacks(t *testing.T) {
	tests := []struct {
		name  string
		parse func([]byte) (Push, error)
		body  string
		want  []string
	}{
		{"not JSON", parseGitHub, "ref=refs/heads/main", []string{"not a push payload"}},
		{"a JSON array", parseGitLab, "[]", []string{"not a push payload"}},
		{"a GitHub payload without a repository", parseGitHub, `{"ref":"refs/heads/main"}`, []string{"no repository", "repository.clone_url"}},
		{"a GitHub payload without a ref", parseGitHub, `{"repository":{"clone_url":"https://h/o/r.git"}}`, []string{"no ref"}},
		{"a GitLab payload without a project", parseGitLab, `{"ref":"refs/heads/main"}`, []string{"project.git_http_url"}},
		{"a Bitbucket payload without changes", parseBitbucket, `{"repository":{"links":{"clone":[{"href":"https://h/scm/p/r.git"}]}}}`, []string{"changes[].ref.id"}},
		{"a generic payload with a short branch name", parseGeneric, `{"repository":"https://h/o/r.git","ref":"main"}`, []string{"refs/heads/<branch>"}},
		{"a generic payload with the repository as an object", parseGeneric, `{"repository":{"url":"https://h/o/r.git"},"ref":"refs/heads/main"}`, []string{"not a push payload"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.parse([]byte(tt.body))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
