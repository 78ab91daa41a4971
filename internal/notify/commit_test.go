package notify

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

func TestCommitURL(t *testing.T) {
	const rev = "3f2a9c1e0d4b"
	tests := []struct {
		name, gitURL, want string
	}{
		{"a GitHub https URL links its commit page", "https://github.com/Org/Fleet.git", "https://github.com/Org/Fleet/commit/" + rev},
		{"a GitHub scp-like URL links over https", "git@github.com:org/fleet.git", "https://github.com/org/fleet/commit/" + rev},
		{"a token in the URL is left out", "https://x-access-token:ghs_secret@github.com/org/fleet", "https://github.com/org/fleet/commit/" + rev},
		{"GitLab nested groups use /-/commit/", "ssh://git@gitlab.com/group/sub/app.git", "https://gitlab.com/group/sub/app/-/commit/" + rev},
		{"a self-hosted GitLab by its name", "https://gitlab.example.com/ops/fleet", "https://gitlab.example.com/ops/fleet/-/commit/" + rev},
		{"a Gitea SSH port is dropped", "ssh://git@gitea.example.com:2222/ops/fleet.git", "https://gitea.example.com/ops/fleet/commit/" + rev},
		{"an http Gitea keeps its scheme and port", "http://gitea.local:3000/ops/fleet.git", "http://gitea.local:3000/ops/fleet/commit/" + rev},
		{"Codeberg", "https://codeberg.org/ops/fleet.git", "https://codeberg.org/ops/fleet/commit/" + rev},
		{"an unknown host gets no link", "https://git.example.com/ops/fleet.git", ""},
		{"a file URL gets no link", "file:///srv/git/fleet.git", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CommitURL(tt.gitURL, rev); got != tt.want {
				t.Errorf("CommitURL(%q) = %q, want %q", tt.gitURL, got, tt.want)
			}
		})
	}
}

func TestMessagesNameTheCommitAndLinkIt(t *testing.T) {
	e, r := messageEndpoints(t)
	s := syncObj()
	s.Spec.Source.Git.URL = "git@github.com:org/fleet.git"
	s.Status.History = []v1alpha1.SyncRecord{{Revision: s.Status.LastAttemptedRevision, Result: v1alpha1.ResultFailed,
		Subject: "web: raise the memory limit", Author: "Ana Lima"}}
	r.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonBuildFailed, "Sync", "%s", "apps/web.yaml: yaml: line 3")
	link := "https://github.com/org/fleet/commit/" + s.Status.LastAttemptedRevision

	var g GenericBody
	if err := json.Unmarshal(e[TypeGeneric].waitFor(t, 1)[0].body, &g); err != nil {
		t.Fatal(err)
	}
	if g.Subject != "web: raise the memory limit" || g.Author != "Ana Lima" || g.CommitURL != link {
		t.Errorf("generic body names %q by %q at %q, want the subject, author and %s", g.Subject, g.Author, g.CommitURL, link)
	}
	var sl struct{ Text string }
	if err := json.Unmarshal(e[TypeSlack].waitFor(t, 1)[0].body, &sl); err != nil {
		t.Fatal(err)
	}
	if slack := sl.Text; !strings.Contains(slack, "<"+link+"|2222222 web: raise the memory limit (Ana Lima)>") {
		t.Errorf("Slack text %s does not link the commit with its subject and author", slack)
	}
	if teams := string(e[TypeTeams].waitFor(t, 1)[0].body); !strings.Contains(teams, "[2222222 web: raise the memory limit (Ana Lima)]("+link+")") {
		t.Errorf("Teams card %s does not link the commit with its subject and author", teams)
	}
}

// messageEndpoints starts a dispatcher with a target of each message
// type (generic, Slack, Teams), each to an endpoint of its own.
func messageEndpoints(t *testing.T) (map[string]*endpoint, Recorder) {
	t.Helper()
	e := map[string]*endpoint{}
	var cfg Config
	for _, typ := range []string{TypeGeneric, TypeSlack, TypeTeams} {
		e[typ] = newEndpoint(t)
		cfg.Targets = append(cfg.Targets, Target{Name: typ, Type: typ, URL: e[typ].URL})
	}
	r, _ := start(t, cfg, Options{})
	return e, r
}
