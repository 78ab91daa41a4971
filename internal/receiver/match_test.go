package receiver

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

// syncOf returns a Sync of url; change edits its git source or spec.
func syncOf(namespace, name, url string, change ...func(*v1alpha1.Sync)) v1alpha1.Sync {
	s := v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: url, Branch: "main"}}},
	}
	for _, c := range change {
		c(&s)
	}
	return s
}

func branch(b string) func(*v1alpha1.Sync) {
	return func(s *v1alpha1.Sync) { s.Spec.Source.Git.Branch = b }
}

func tag(t string) func(*v1alpha1.Sync) {
	return func(s *v1alpha1.Sync) { s.Spec.Source.Git.Branch, s.Spec.Source.Git.Tag = "", t }
}

func commit(c string) func(*v1alpha1.Sync) {
	return func(s *v1alpha1.Sync) { s.Spec.Source.Git.Branch, s.Spec.Source.Git.Commit = "", c }
}

func suspended(s *v1alpha1.Sync) { s.Spec.Suspend = true }

func deleting(s *v1alpha1.Sync) {
	now := metav1.NewTime(time.Now())
	s.DeletionTimestamp = &now
	s.Finalizers = []string{"driftless.dev/finalizer"}
}

// fleet are Syncs of git.example.com/platform/fleet written every way a
// user may write it, and Syncs of other repositories and refs.
func fleet() []v1alpha1.Sync {
	return []v1alpha1.Sync{
		syncOf("team-b", "fleet-ssh", "ssh://git@git.example.com/platform/fleet.git"),
		syncOf("team-a", "fleet-ssh-2222", "ssh://git@git.example.com:2222/platform/fleet.git"),
		syncOf("team-a", "fleet-bitbucket", "ssh://git@git.example.com:7999/platform/fleet.git"),
		syncOf("team-a", "fleet-https", "https://git.example.com/platform/fleet"),
		syncOf("team-a", "fleet-scp", "git@Git.Example.com:Platform/fleet.git"),
		syncOf("team-a", "fleet-token", "https://x-access-token:s3cret@git.example.com/platform/fleet.git/"),
		syncOf("team-a", "fleet-dev", "https://git.example.com/platform/fleet.git", branch("dev")),
		syncOf("team-a", "fleet-master", "https://git.example.com/platform/fleet.git", branch("")),
		syncOf("team-a", "fleet-tag", "https://git.example.com/platform/fleet.git", tag("v1.0.0")),
		syncOf("team-a", "fleet-pinned", "https://git.example.com/platform/fleet.git", commit("0123456789abcdef0123456789abcdef01234567")),
		syncOf("team-a", "fleet-suspended", "https://git.example.com/platform/fleet.git", suspended),
		syncOf("team-a", "fleet-deleting", "https://git.example.com/platform/fleet.git", deleting),
		syncOf("team-a", "other-repo", "https://git.example.com/platform/fleet-two.git"),
		syncOf("team-a", "other-host", "https://git.other.example.com/platform/fleet.git"),
		syncOf("team-a", "unparseable", "not a url"),
	}
}

func names(syncs []*v1alpha1.Sync) []string {
	out := []string{}
	for _, s := range syncs {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

func TestMatchWakesExactlyTheSyncsOfThePushedRepositoryAndRef(t *testing.T) {
	fleetMain := []string{"team-a/fleet-https", "team-a/fleet-scp", "team-a/fleet-token", "team-b/fleet-ssh"}
	tests := []struct {
		name string
		push Push
		want []string
	}{
		{
			"an HTTPS address wakes the Syncs of that repository over HTTPS, SSH and scp-like addresses",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/heads/main"}},
			fleetMain,
		},
		{
			"an scp-like address wakes the same Syncs",
			Push{Repositories: []string{"git@git.example.com:platform/fleet.git"}, Refs: []string{"refs/heads/main"}},
			fleetMain,
		},
		{
			"a web page address in other case wakes the same Syncs",
			Push{Repositories: []string{"https://GIT.example.com/Platform/Fleet"}, Refs: []string{"refs/heads/main"}},
			fleetMain,
		},
		{
			"an SSH address on another port wakes only the Syncs of that port",
			Push{Repositories: []string{"ssh://git@git.example.com:2222/platform/fleet.git"}, Refs: []string{"refs/heads/main"}},
			[]string{"team-a/fleet-ssh-2222"},
		},
		{
			"a push naming the HTTPS address and the SSH address on its port, as Gitea sends, wakes the Syncs of both",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git", "ssh://git@git.example.com:2222/platform/fleet.git"}, Refs: []string{"refs/heads/main"}},
			[]string{"team-a/fleet-https", "team-a/fleet-scp", "team-a/fleet-ssh-2222", "team-a/fleet-token", "team-b/fleet-ssh"},
		},
		{
			"a push to another branch wakes only the Sync of that branch",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/heads/dev"}},
			[]string{"team-a/fleet-dev"},
		},
		{
			"a push to master wakes the Sync that names no branch",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/heads/master"}},
			[]string{"team-a/fleet-master"},
		},
		{
			"a tag push wakes the Sync of that tag only",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/tags/v1.0.0"}},
			[]string{"team-a/fleet-tag"},
		},
		{
			"a branch named like the tag does not wake the tag's Sync",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/heads/v1.0.0"}},
			[]string{},
		},
		{
			"a push of several refs wakes the Syncs of each",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/heads/dev", "refs/tags/v1.0.0"}},
			[]string{"team-a/fleet-dev", "team-a/fleet-tag"},
		},
		{
			"a push to a branch no Sync follows wakes nothing",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/heads/feature"}},
			[]string{},
		},
		{
			"a push to another repository wakes only its Sync",
			Push{Repositories: []string{"https://git.example.com/platform/fleet-two.git"}, Refs: []string{"refs/heads/main"}},
			[]string{"team-a/other-repo"},
		},
		{
			"a push to the same path on another host wakes only its Sync",
			Push{Repositories: []string{"https://git.other.example.com/platform/fleet.git"}, Refs: []string{"refs/heads/main"}},
			[]string{"team-a/other-host"},
		},
		{
			"a push to an unknown repository wakes nothing",
			Push{Repositories: []string{"https://git.example.com/platform/unknown.git"}, Refs: []string{"refs/heads/main"}},
			[]string{},
		},
		{
			"a pull request ref wakes nothing",
			Push{Repositories: []string{"https://git.example.com/platform/fleet.git"}, Refs: []string{"refs/pull/1/head"}},
			[]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(Match(fleet(), tt.push))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("woken Syncs (-want +got):\n%s", diff)
			}
		})
	}
}
