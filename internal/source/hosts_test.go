package source

import (
	"errors"
	"strings"
	"testing"
)

func TestHostPatterns(t *testing.T) {
	h, err := ParseHosts([]string{"github.com", " *.Corp.Example ", ""})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"github.com", true},
		{"GitHub.com:443", true},
		{"api.github.com", false},
		{"git.corp.example", true},
		{"a.b.corp.example:2222", true},
		{"corp.example", false},
		{"evilcorp.example", false},
		{"169.254.169.254", false},
		{"github.com.evil.example", false},
	} {
		if got := h.Allows(tc.host); got != tc.want {
			t.Errorf("Allows(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
	if !(Hosts{}).Allows("anything.example") {
		t.Error("no patterns must allow every host")
	}
	for _, bad := range []string{"https://github.com", "github.com:22", "*", "*.", "a*.example", "github.com/org"} {
		if _, err := ParseHosts([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseHosts(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestCheckHostNamesTheHostAndTheFlag(t *testing.T) {
	h, _ := ParseHosts([]string{"github.com"})
	for _, raw := range []string{"https://github.com/org/fleet.git", "git@github.com:org/fleet.git", "/srv/git/fleet"} {
		if err := h.CheckHost("spec.source.git.url", raw); err != nil {
			t.Errorf("CheckHost(%q): %v", raw, err)
		}
	}
	err := h.CheckHost("spec.source.git.url", "https://user:s3cret-token@10.0.0.1:8443/org/fleet.git")
	var he *HostNotAllowedError
	if !errors.As(err, &he) {
		t.Fatalf("error %v is not a *HostNotAllowedError", err)
	}
	for _, want := range []string{"spec.source.git.url", "10.0.0.1:8443", "--tenant-source-hosts", "github.com"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error shows the token: %v", err)
	}
}

func TestCheckHostRefusesWhatItCannotReadOrWhatHidesAnotherHost(t *testing.T) {
	h, _ := ParseHosts([]string{"github.com", "*.corp.example"})
	for _, raw := range []string{
		"https://GitHub.com/org/fleet.git",
		"ssh://git@git.corp.example:2222/org/fleet.git",
		"git@GITHUB.COM:org/fleet.git",
	} {
		if err := h.CheckHost("spec.source.git.url", raw); err != nil {
			t.Errorf("CheckHost(%q) = %v, want allowed", raw, err)
		}
	}
	for _, raw := range []string{
		"https://evil.example/.git",               // no repository path
		"https://evil.example/x/..",               // a path that cleans to nothing
		"https://evil.example",                    // no path at all
		"https://github.com@evil.example/org/x",   // the allowed name as user info
		"https://evil.example#@github.com/org/x",  // the allowed name after a fragment
		"https://evil.example\\@github.com/org/x", // a backslash
		"https://[::1]/org/x",                     // an IP literal
		"https://127.0.0.1/org/x",
		"https:///org/x", // no host
		"git@evil.example:org/x.git",
		"github.com.evil.example:org/x.git",
		"corp.example:org/x.git", // the domain itself is not under *.corp.example
	} {
		var he *HostNotAllowedError
		if err := h.CheckHost("spec.source.git.url", raw); !errors.As(err, &he) {
			t.Errorf("CheckHost(%q) = %v, want a *HostNotAllowedError", raw, err)
		}
	}
}

func TestCheckURLAllowsAnyPathOnAnAllowedHostAndNothingElse(t *testing.T) {
	h, _ := ParseHosts([]string{"github.com", "*.corp.example"})
	for _, raw := range []string{"https://vault.corp.example:8200", "https://vault.corp.example/", "http://GitHub.com/login/oauth"} {
		if err := h.CheckURL("the Vault address", raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want allowed", raw, err)
		}
	}
	for _, raw := range []string{
		"http://127.0.0.1:8200",
		"http://169.254.169.254/computeMetadata/v1/",
		"https://github.com@evil.example/",
		"https://evil.example#@github.com/",
		"https:///v1/transit",
		"unix:///var/run/vault.sock",
	} {
		var he *HostNotAllowedError
		if err := h.CheckURL("the Vault address", raw); !errors.As(err, &he) || !strings.Contains(err.Error(), "the Vault address") {
			t.Errorf("CheckURL(%q) = %v, want a *HostNotAllowedError naming the address", raw, err)
		}
	}
	if err := (Hosts{}).CheckURL("the Vault address", "http://127.0.0.1:8200"); err != nil {
		t.Errorf("no patterns must allow every address: %v", err)
	}
}
