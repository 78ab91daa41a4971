package source

import "testing"

func TestRepositoryKeyIsTheSameForEveryAddressOfARepository(t *testing.T) {
	tests := []struct {
		name, url string
	}{
		{"an HTTPS clone URL", "https://github.com/example/fleet.git"},
		{"an HTTPS URL without .git", "https://github.com/example/fleet"},
		{"an HTTPS URL with a trailing slash", "https://github.com/example/fleet/"},
		{"an HTTPS URL with .git and a trailing slash", "https://github.com/example/fleet.git/"},
		{"an HTTPS URL with a token as user", "https://x-access-token:s3cret@github.com/example/fleet.git"},
		{"an HTTPS URL with the default port", "https://github.com:443/example/fleet.git"},
		{"an HTTP URL", "http://github.com/example/fleet.git"},
		{"a host and scheme in capitals", "HTTPS://GitHub.COM/example/fleet.git"},
		{"an organisation in capitals, as a web page shows it", "https://github.com/Example/Fleet"},
		{"an SSH URL", "ssh://git@github.com/example/fleet.git"},
		{"an SSH URL with the default port", "ssh://git@github.com:22/example/fleet.git"},
		{"an HTTP URL with the default port", "http://github.com:80/example/fleet.git"},
		{"an scp-like address", "git@github.com:example/fleet.git"},
		{"an scp-like address without .git", "git@github.com:example/fleet"},
		{"an scp-like address with a leading slash", "git@github.com:/example/fleet.git"},
		{"a git:// URL", "git://github.com/example/fleet.git"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RepositoryKey(tt.url)
			if !ok || got != "github.com/example/fleet" {
				t.Errorf("RepositoryKey(%q) = %q, %v; want github.com/example/fleet, true", tt.url, got, ok)
			}
		})
	}
}

func TestRepositoryKeyTellsRepositoriesApart(t *testing.T) {
	tests := []struct {
		name, a, b string
	}{
		{"another repository", "https://github.com/example/fleet.git", "https://github.com/example/fleet-two.git"},
		{"another organisation", "https://github.com/example/fleet.git", "https://github.com/other/fleet.git"},
		{"another host", "https://github.com/example/fleet.git", "https://gitlab.com/example/fleet.git"},
		{"another port on the same host", "ssh://git@git.example.com:2222/example/fleet.git", "ssh://git@git.example.com:2223/example/fleet.git"},
		{"a non-default port and the default one", "https://git.example.com:3000/example/fleet.git", "https://git.example.com/example/fleet.git"},
		{"a GitLab subgroup", "https://gitlab.com/group/fleet.git", "https://gitlab.com/group/sub/fleet.git"},
		{"another local path", "file:///srv/git/fleet.git", "/srv/git/other.git"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := RepositoryKey(tt.a)
			b, _ := RepositoryKey(tt.b)
			if a == b {
				t.Errorf("%q and %q have the same key %q", tt.a, tt.b, a)
			}
		})
	}
}

func TestRepositoryKeyKeepsAPortThatIsNotTheDefault(t *testing.T) {
	tests := []struct {
		url, want string
	}{
		{"ssh://git@Git.Example.com:2222/Org/Fleet.git", "git.example.com:2222/org/fleet"},
		{"git@git.example.com:2222:org/fleet.git", "git.example.com:2222/org/fleet"},
		{"https://git.example.com:8443/org/fleet", "git.example.com:8443/org/fleet"},
		{"http://[::1]:3000/fleet.git", "[::1]:3000/fleet"},
		{"https://[::1]/fleet.git", "[::1]/fleet"},
	}
	for _, tt := range tests {
		if got, ok := RepositoryKey(tt.url); !ok || got != tt.want {
			t.Errorf("RepositoryKey(%q) = %q, %v; want %q", tt.url, got, ok, tt.want)
		}
	}
}

func TestRepositoryKeyOfLocalRepositoriesKeepsTheCase(t *testing.T) {
	for _, raw := range []string{"file:///srv/Git/fleet.git", "/srv/Git/fleet.git", "file://localhost/srv/Git/fleet.git/"} {
		got, ok := RepositoryKey(raw)
		if !ok || got != "file:///srv/Git/fleet.git" {
			t.Errorf("RepositoryKey(%q) = %q, %v; want file:///srv/Git/fleet.git, true", raw, got, ok)
		}
	}
}

func TestRepositoryKeyRefusesAddressesWithoutARepository(t *testing.T) {
	for _, raw := range []string{"", "https://github.com/", "https://github.com/.git", "git@github.com:", "ftp://example.com/fleet.git", "relative/path.git"} {
		if got, ok := RepositoryKey(raw); ok {
			t.Errorf("RepositoryKey(%q) = %q, true; want not ok", raw, got)
		}
	}
}

func TestRefNameIsTheFullReferenceARefFollows(t *testing.T) {
	tests := []struct {
		name string
		ref  Ref
		want string
	}{
		{"a branch", Ref{Branch: "main"}, "refs/heads/main"},
		{"no ref at all follows master", Ref{}, "refs/heads/master"},
		{"a tag", Ref{Tag: "v1.2.0"}, "refs/tags/v1.2.0"},
		{"a commit follows nothing", Ref{Commit: "0123456789abcdef0123456789abcdef01234567"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ref.RefName(); got != tt.want {
				t.Errorf("RefName() = %q, want %q", got, tt.want)
			}
		})
	}
}
