package image

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/policy"
	"github.com/driftless/driftless/internal/image/update/forgetest"
	"github.com/driftless/driftless/internal/testenv"
)

const forgeToken = "ghp_9c1e0d4b5a6f3f2a77e1"

// prFixture is a Sync in PullRequest mode over a real git server, with an
// ImagePolicy scanning a real registry, and a recording provider server.
type prFixture struct {
	*updateFixture
	reg    *testenv.Registry
	forge  *forgetest.Server
	policy *PolicyReconciler
}

func newPRFixture(t *testing.T, provider string) *prFixture {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	reg := testenv.NewRegistry(t)
	reg.Push(t, "app", "1.0.0")
	reg.Push(t, "app", "1.1.0")
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "org/fleet")
	head := repo.Commit(t, "apps", map[string]string{
		"apps/app.yaml": "image: " + reg.Host() + "/app:1.0.0 # {\"$imagepolicy\": \"" + ns + ":app\"}\n"})
	forge := forgetest.New(t, provider, "org/fleet")
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns}, Data: map[string][]byte{"identity": srv.DeployKey, "known_hosts": srv.KnownHosts()}},
		{ObjectMeta: metav1.ObjectMeta{Name: "forge", Namespace: ns}, Data: map[string][]byte{"token": []byte(forgeToken)}},
	} {
		if err := c.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	createPolicy(t, ns, "app", semver(reg.Host()+"/app", "^1"))
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.SSHURL(), Branch: "main", SecretRef: &v1alpha1.LocalObjectReference{Name: "git"}}},
			ImageUpdate: &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdatePullRequest, Branch: "image-updates",
				PullRequest: &v1alpha1.PullRequestSpec{Provider: v1alpha1.PullRequestProvider(provider), Address: forge.Address(),
					TokenSecretRef: v1alpha1.LocalObjectReference{Name: "forge"}}},
		},
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	r := &UpdateReconciler{Client: c, Reader: c, Scanner: policy.NewScanner(policy.DefaultScanOptions()), Recorder: recorder, CacheDir: t.TempDir()}
	f := &prFixture{updateFixture: &updateFixture{ns: ns, repo: repo, head: head, sync: s, r: r}, reg: reg, forge: forge, policy: newPolicyReconciler()}
	f.scan(t)
	return f
}

// scan runs the ImagePolicy's scan of the registry.
func (f *prFixture) scan(t *testing.T) {
	t.Helper()
	reconcilePolicy(t, f.policy, f.ns, "app")
}

// rev is a revision of the repository on the git server ("" when absent).
func (f *prFixture) rev(t *testing.T, rev string) string {
	t.Helper()
	out, err := testenv.GitCommand(f.repo.Bare, "rev-parse", "--verify", "--quiet", rev).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func (f *prFixture) show(t *testing.T, rev string) string {
	t.Helper()
	out, err := testenv.GitCommand(f.repo.Bare, "show", rev+":apps/app.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return string(out)
}

// writes counts the requests that change something on the provider.
func (f *prFixture) writes() int {
	n := 0
	for _, r := range f.forge.Requests() {
		if r.Method != "GET" {
			n++
		}
	}
	return n
}

// A tag pushed opens one pull request from the robot branch, committed on
// top of main; the same tag again asks nothing; a newer tag force-pushes
// the branch and updates the same request; once merged, the request is
// recorded Merged and nothing is reopened.
func TestPullRequestModeKeepsOneRequestFromTagToMerge(t *testing.T) {
	for _, provider := range []string{"github", "gitlab", "gitea"} {
		t.Run(provider, func(t *testing.T) {
			f := newPRFixture(t, provider)
			s := f.reconcile(t)
			robot := f.rev(t, "image-updates")
			if f.rev(t, "main") != f.head {
				t.Errorf("main moved: the robot pushes only its own branch")
			}
			if robot == "" || f.rev(t, "image-updates^") != f.head || !strings.Contains(f.show(t, "image-updates"), "/app:1.1.0") {
				t.Fatalf("branch image-updates is %q, want 1.1.0 committed on top of main %s", robot, f.head)
			}
			prs := f.forge.PRs()
			if len(prs) != 1 || prs[0].Head != "image-updates" || prs[0].Base != "main" || prs[0].State != "open" ||
				!strings.Contains(prs[0].Body, "| `apps/app.yaml` | 1 | `"+f.reg.Host()+"/app` | `"+f.reg.Host()+"/app:1.0.0` → `"+f.reg.Host()+"/app:1.1.0` | "+f.ns+"/app |") {
				t.Fatalf("the provider holds %+v, want one open request from image-updates into main listing the change", prs)
			}
			u := s.Status.ImageUpdate
			if u == nil || u.PullRequest == nil || u.PullRequest.Number != 1 || u.PullRequest.State != v1alpha1.PullRequestOpen ||
				u.PullRequest.Commit != robot || !strings.HasPrefix(u.PullRequest.URL, f.forge.URL) || len(u.Problems) != 0 {
				t.Fatalf("status.imageUpdate = %+v (pull request %+v), want #1 Open at %s", u, u.PullRequest, robot)
			}
			eventFor(t, v1alpha1.SyncKind, f.ns, "fleet", "opened pull request #1")

			// The same tag: the branch already holds the change.
			writes := f.writes()
			f.reconcile(t)
			if f.rev(t, "image-updates") != robot || f.writes() != writes {
				t.Errorf("the same tag moved the branch (%s, was %s) or wrote to the provider (%d writes, was %d)", f.rev(t, "image-updates"), robot, f.writes(), writes)
			}

			// A newer tag: the same request, updated.
			f.reg.Push(t, "app", "1.2.0")
			f.scan(t)
			s = f.reconcile(t)
			newer := f.rev(t, "image-updates")
			if newer == robot || f.rev(t, "image-updates^") != f.head || !strings.Contains(f.show(t, "image-updates"), "/app:1.2.0") {
				t.Fatalf("branch image-updates is %s, want 1.2.0 force-pushed on top of main %s", newer, f.head)
			}
			prs = f.forge.PRs()
			if len(prs) != 1 || prs[0].State != "open" || !strings.Contains(prs[0].Body, "/app:1.2.0` |") || !strings.Contains(prs[0].Title, "/app:1.2.0") {
				t.Fatalf("the provider holds %+v, want the one request rewritten for 1.2.0", prs)
			}
			if pr := s.Status.ImageUpdate.PullRequest; pr == nil || pr.Number != 1 || pr.Commit != newer {
				t.Errorf("status pull request %+v, want #1 at %s", pr, newer)
			}
			eventFor(t, v1alpha1.SyncKind, f.ns, "fleet", "updated pull request #1")

			// A person merges it (fast-forward, as the provider's merge
			// button may).
			if out, err := testenv.GitCommand(f.repo.Bare, "update-ref", "refs/heads/main", newer).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			f.forge.Merge(1)
			for range 2 {
				s = f.reconcile(t)
			}
			if prs := f.forge.PRs(); len(prs) != 1 || prs[0].State != "merged" {
				t.Errorf("the provider holds %+v, want the one request, merged, and no other", prs)
			}
			if pr := s.Status.ImageUpdate.PullRequest; pr == nil || pr.Number != 1 || pr.State != v1alpha1.PullRequestMerged {
				t.Errorf("status pull request %+v, want #1 Merged", pr)
			}
			if len(s.Status.ImageUpdate.Problems) != 0 {
				t.Errorf("problems: %q", s.Status.ImageUpdate.Problems)
			}
		})
	}
}

// When the base gets the change another way (a person commits the same
// tag to main), the open request is closed, and not reopened.
func TestPullRequestModeClosesTheRequestWhenTheBaseHasItsChanges(t *testing.T) {
	f := newPRFixture(t, "github")
	f.reconcile(t)
	if prs := f.forge.PRs(); len(prs) != 1 {
		t.Fatalf("the provider holds %+v, want one request", prs)
	}
	f.repo.Commit(t, "bump by hand", map[string]string{
		"apps/app.yaml": "image: " + f.reg.Host() + "/app:1.1.0 # {\"$imagepolicy\": \"" + f.ns + ":app\"}\n"})
	var s *v1alpha1.Sync
	for range 2 {
		s = f.reconcile(t)
	}
	if prs := f.forge.PRs(); len(prs) != 1 || prs[0].State != "closed" {
		t.Errorf("the provider holds %+v, want the one request closed", prs)
	}
	if pr := s.Status.ImageUpdate.PullRequest; pr == nil || pr.State != v1alpha1.PullRequestClosed {
		t.Errorf("status pull request %+v, want Closed", pr)
	}
	eventFor(t, v1alpha1.SyncKind, f.ns, "fleet", "closed pull request #1 "+f.forge.URL)
}

// A token Secret that is missing pushes nothing and says what to create;
// an address on another host than the git URL's gets no request (the
// token stays with the repository's host); no message holds the token.
func TestPullRequestModeRefusesWhatWouldMisplaceTheToken(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.PullRequestSpec)
		want string
	}{
		{"a missing token Secret", func(p *v1alpha1.PullRequestSpec) { p.TokenSecretRef.Name = "nope" },
			"nothing pushed: token Secret %s/nope does not exist: create it with the API token under token"},
		{"an address on another host", func(p *v1alpha1.PullRequestSpec) { p.Address = strings.Replace(p.Address, "127.0.0.1", "localhost", 1) },
			"is not on 127.0.0.1, the host of spec.source.git.url"},
		{"a plain http address on a host that is not loopback", func(p *v1alpha1.PullRequestSpec) { p.Address = "http://gitea.example:3000/api/v1" },
			"is plain http to gitea.example, which is not a loopback address: the token would cross the network in clear"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPRFixture(t, "gitea")
			key := client.ObjectKeyFromObject(f.sync)
			if err := c.Get(ctx, key, f.sync); err != nil {
				t.Fatal(err)
			}
			tc.edit(f.sync.Spec.ImageUpdate.PullRequest)
			if err := c.Update(ctx, f.sync); err != nil {
				t.Fatal(err)
			}
			s := f.reconcile(t)
			want := strings.ReplaceAll(tc.want, "%s", f.ns)
			if u := s.Status.ImageUpdate; u == nil || len(u.Problems) != 1 || !strings.Contains(u.Problems[0], want) {
				t.Fatalf("status.imageUpdate = %+v, want a problem saying %q", u, want)
			}
			if f.rev(t, "image-updates") != "" || len(f.forge.Requests()) != 0 {
				t.Errorf("pushed the robot branch or asked the provider (%d requests)", len(f.forge.Requests()))
			}
			if strings.Contains(strings.Join(s.Status.ImageUpdate.Problems, " "), forgeToken) {
				t.Errorf("the problems show the token")
			}
			eventFor(t, v1alpha1.SyncKind, f.ns, "fleet", want)
		})
	}
}

// The API server refuses a PullRequest mode without a robot branch, or
// whose robot branch is the base.
func TestPullRequestModeNeedsARobotBranchOtherThanTheBase(t *testing.T) {
	ns := env.Namespace(t)
	pr := &v1alpha1.PullRequestSpec{Provider: v1alpha1.ProviderGitHub, TokenSecretRef: v1alpha1.LocalObjectReference{Name: "forge"}}
	for _, tc := range []struct {
		name, branch, base, want string
	}{
		{"no branch", "", "", "mode PullRequest needs pullRequest and branch"},
		{"the Sync's branch", "main", "", "spec.imageUpdate.branch must differ from the pull request's base"},
		{"the base named", "release", "release", "spec.imageUpdate.branch must differ from the pull request's base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *pr
			p.Base = tc.base
			s := &v1alpha1.Sync{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "fleet-", Namespace: ns},
				Spec: v1alpha1.SyncSpec{
					Source:      v1alpha1.Source{Git: v1alpha1.GitSource{URL: "https://github.com/org/fleet.git", Branch: "main"}},
					ImageUpdate: &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdatePullRequest, Branch: tc.branch, PullRequest: &p},
				},
			}
			err := c.Create(context.Background(), s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create: %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// The repository comes from the Sync's git URL in each form, and the
// address must be on its host.
func TestPullRequestRepositoryComesFromTheGitURL(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge", Namespace: ns},
		Data: map[string][]byte{"token": []byte(forgeToken + "\n")}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, gitURL, provider, address, wantRepo, wantErr string
	}{
		{"GitHub, scp-like", "git@github.com:Org/Fleet.git", "github", "", "Org/Fleet", ""},
		{"GitHub, https", "https://github.com/Org/Fleet.git", "github", "", "Org/Fleet", ""},
		{"GitLab nested groups over ssh:// on another port", "ssh://git@gitlab.example.com:2222/group/sub/app.git", "gitlab", "https://gitlab.example.com/api/v4", "group/sub/app", ""},
		{"GitHub Enterprise", "https://github.example.com/ops/fleet", "github", "https://github.example.com/api/v3", "ops/fleet", ""},
		{"the default address for a repository elsewhere", "https://gitlab.example.com/ops/fleet.git", "gitlab", "", "",
			"spec.imageUpdate.pullRequest.address https://gitlab.com/api/v4 is not on gitlab.example.com"},
		{"Gitea needs an address", "https://gitea.example.com/ops/fleet.git", "gitea", "", "", "address is required for provider gitea"},
	}
	r := &UpdateReconciler{Client: c, Reader: c}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns}, Spec: v1alpha1.SyncSpec{
				Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: tt.gitURL, Branch: "main"}},
				ImageUpdate: &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdatePullRequest, Branch: "image-updates",
					PullRequest: &v1alpha1.PullRequestSpec{Provider: v1alpha1.PullRequestProvider(tt.provider), Address: tt.address,
						TokenSecretRef: v1alpha1.LocalObjectReference{Name: "forge"}}}}}
			f, err := r.forge(ctx, c, s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("forge: %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("forge: %v", err)
			}
			if f.Repo != tt.wantRepo || f.Token != forgeToken {
				t.Errorf("forge: repository %q, token read whole: %v; want repository %s and the token without its newline", f.Repo, f.Token == forgeToken, tt.wantRepo)
			}
		})
	}
}
