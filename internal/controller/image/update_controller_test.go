package image

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/policy"
	"github.com/driftless/driftless/internal/testenv"
)

// A marker naming a policy that does not exist, in Commit mode: nothing
// is pushed, the Sync's status names the file and line, and a warning
// event says it; the other file's marker is still applied.
func TestImageUpdateReportsAMarkerNamingAMissingPolicyAndCommitsTheRest(t *testing.T) {
	f := newUpdateFixture(t, func(ns string) map[string]string {
		return map[string]string{
			"apps/bad.yaml":  "image: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"" + ns + ":missing\"}\n",
			"apps/good.yaml": "image: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"" + ns + ":app\"}\n",
		}
	}, &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdateCommit})
	ns, repo, head := f.ns, f.repo, f.head
	s := f.reconcile(t)
	u := s.Status.ImageUpdate
	if u == nil || len(u.Problems) != 1 || !strings.Contains(u.Problems[0], "apps/bad.yaml:1: the marker names ImagePolicy "+ns+"/missing, which does not exist") {
		t.Fatalf("status.imageUpdate = %+v, want the missing policy reported at apps/bad.yaml:1", u)
	}
	if u.LastCommit == "" {
		t.Errorf("the good file was not committed: %+v", u)
	}
	show := func(path string) string {
		out, err := testenv.GitCommand(repo.Bare, "show", "main:"+path).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	if got := show("apps/bad.yaml"); !strings.Contains(got, "app:1.0.0") {
		t.Errorf("bad.yaml was changed:\n%s", got)
	}
	if got := show("apps/good.yaml"); !strings.Contains(got, "app:1.1.0") {
		t.Errorf("good.yaml was not updated:\n%s", got)
	}
	out, _ := testenv.GitCommand(repo.Bare, "rev-parse", "main^").CombinedOutput()
	if strings.TrimSpace(string(out)) != head {
		t.Errorf("the image commit's parent is %s, want %s", out, head)
	}
	eventFor(t, v1alpha1.SyncKind, ns, "fleet", "which does not exist")
	eventFor(t, v1alpha1.SyncKind, ns, "fleet", "committed "+u.LastCommit[:7]+" to branch main")
	for _, result := range []string{"committed", "failed"} {
		if got := testutil.ToFloat64(updates.WithLabelValues(ns+"/fleet", result)); got != 1 {
			t.Errorf("driftless_image_updates_total{result=%q} = %v, want 1", result, got)
		}
	}
	// A deleted Sync leaves no series behind.
	if err := c.Delete(context.Background(), f.sync); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.sync)}); err != nil {
		t.Fatal(err)
	}
	for _, result := range []string{"committed", "failed"} {
		if updates.DeleteLabelValues(ns+"/fleet", result) {
			t.Errorf("driftless_image_updates_total{result=%q} still has a series for the deleted Sync", result)
		}
	}
}

// A repository migrated from Flux v1, unchanged: the annotations imply a
// policy per container, scanned from the registry; Report mode lists the
// change and pushes nothing.
func TestImageUpdateReadsFluxV1AnnotationsAndReportsWithoutPushing(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	reg := testenv.NewRegistry(t)
	for _, tag := range []string{"1.2.0", "1.2.5", "1.3.0"} {
		reg.Push(t, "legacy", tag)
	}
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	head := repo.Commit(t, "legacy", map[string]string{"workloads/legacy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: legacy
  annotations:
    fluxcd.io/automated: "true"
    fluxcd.io/tag.app: semver:~1.2
spec:
  template:
    spec:
      containers:
      - name: app
        image: ` + reg.Host() + `/legacy:1.2.0
`})
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		Data: map[string][]byte{"identity": srv.DeployKey, "known_hosts": srv.KnownHosts()}}); err != nil {
		t.Fatal(err)
	}
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.SSHURL(), Branch: "main",
				SecretRef: &v1alpha1.LocalObjectReference{Name: "git"}}},
			ImageUpdate: &v1alpha1.ImageUpdateSpec{}, // Report by default
		},
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	r := &UpdateReconciler{Client: c, Reader: c, Scanner: policy.NewScanner(policy.DefaultScanOptions()), Recorder: recorder, CacheDir: t.TempDir()}
	key := client.ObjectKeyFromObject(s)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, s); err != nil {
		t.Fatal(err)
	}
	u := s.Status.ImageUpdate
	if u == nil || len(u.Pending) != 1 || len(u.Problems) != 0 {
		t.Fatalf("status.imageUpdate = %+v, want one pending change and no problems", u)
	}
	want := v1alpha1.ImageChange{File: "workloads/legacy.yaml", Line: 13, Image: reg.Host() + "/legacy",
		Old: reg.Host() + "/legacy:1.2.0", New: reg.Host() + "/legacy:1.2.5", Policy: "flux-v1:Deployment/legacy:app"}
	if u.Pending[0] != want {
		t.Errorf("pending %+v, want %+v", u.Pending[0], want)
	}
	out, _ := testenv.GitCommand(repo.Bare, "rev-parse", "main").CombinedOutput()
	if strings.TrimSpace(string(out)) != head {
		t.Errorf("Report mode moved main to %s", out)
	}
	eventFor(t, v1alpha1.SyncKind, ns, "fleet", "Report mode, nothing committed")
}

// updateFixture is a Sync of a repository holding files, whose markers
// may name ImagePolicy "app" of the Sync's namespace at tag 1.1.0.
type updateFixture struct {
	ns   string
	repo *testenv.Repo
	head string
	sync *v1alpha1.Sync
	r    *UpdateReconciler
}

func newUpdateFixture(t *testing.T, files func(ns string) map[string]string, u *v1alpha1.ImageUpdateSpec) *updateFixture {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	head := repo.Commit(t, "apps", files(ns))
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		Data: map[string][]byte{"identity": srv.DeployKey, "known_hosts": srv.KnownHosts()}}); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: semver("registry.example.com/app", "^1")}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.LatestTag = "1.1.0"
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.SSHURL(), Branch: "main",
				SecretRef: &v1alpha1.LocalObjectReference{Name: "git"}}},
			ImageUpdate: u,
		},
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	r := &UpdateReconciler{Client: c, Reader: c, Scanner: policy.NewScanner(policy.DefaultScanOptions()), Recorder: recorder, CacheDir: t.TempDir()}
	return &updateFixture{ns: ns, repo: repo, head: head, sync: s, r: r}
}

// reconcile runs one update and returns the Sync as it is afterwards.
func (f *updateFixture) reconcile(t *testing.T) *v1alpha1.Sync {
	t.Helper()
	key := client.ObjectKeyFromObject(f.sync)
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func (f *updateFixture) serverHead(t *testing.T) string {
	t.Helper()
	out, err := testenv.GitCommand(f.repo.Bare, "rev-parse", "main").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func markedApp(ns string) map[string]string {
	return map[string]string{"apps/app.yaml": "image: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"" + ns + ":app\"}\n"}
}

// A signing key the agent cannot use stops Commit mode before anything is
// pushed, and is reported in the status and a warning event; Report mode
// still lists what it would commit and reports the key, so it is fixed
// before Commit mode needs it. No message holds key material.
func TestImageUpdateWithAnUnusableSigningKeyPushesNothing(t *testing.T) {
	locked := testenv.NewOpenPGPKey(t, "Image Bot", "bot@example.com", "hunter2")
	for _, tc := range []struct {
		name    string
		mode    v1alpha1.ImageUpdateMode
		secret  map[string][]byte // nil: no Secret
		problem string
	}{
		{"Commit mode with a missing Secret", v1alpha1.ImageUpdateCommit, nil, "signing key Secret NS/bot does not exist"},
		{"Commit mode with a passphrase-protected key", v1alpha1.ImageUpdateCommit,
			map[string][]byte{"git.asc": []byte(locked.ArmoredPrivate)}, "is protected by a passphrase"},
		{"Commit mode with an entry that is not a key", v1alpha1.ImageUpdateCommit,
			map[string][]byte{"git.asc": []byte("hunter2")}, "git.asc is not an armored OpenPGP key"},
		{"Report mode with a missing Secret", v1alpha1.ImageUpdateReport, nil, "signing key Secret NS/bot does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newUpdateFixture(t, markedApp, &v1alpha1.ImageUpdateSpec{Mode: tc.mode,
				SigningKey: &v1alpha1.SigningKey{SecretRef: v1alpha1.LocalObjectReference{Name: "bot"}}})
			if tc.secret != nil {
				if err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: f.ns}, Data: tc.secret}); err != nil {
					t.Fatal(err)
				}
			}
			s := f.reconcile(t)
			want := strings.ReplaceAll(tc.problem, "NS", f.ns)
			u := s.Status.ImageUpdate
			if u == nil || len(u.Problems) != 1 || !strings.Contains(u.Problems[0], want) {
				t.Fatalf("status.imageUpdate = %+v, want the problem %q", u, want)
			}
			if strings.Contains(u.Problems[0], "BEGIN PGP") || strings.Contains(u.Problems[0], "hunter2") {
				t.Errorf("the problem holds key material: %s", u.Problems[0])
			}
			if head := f.serverHead(t); head != f.head || u.LastCommit != "" {
				t.Errorf("main moved from %s to %s (last commit %q): nothing may be pushed", f.head, head, u.LastCommit)
			}
			if tc.mode == v1alpha1.ImageUpdateReport && len(u.Pending) != 1 {
				t.Errorf("Report mode lists %v, want the pending change beside the key problem", u.Pending)
			}
			eventFor(t, v1alpha1.SyncKind, f.ns, "fleet", want)
		})
	}
}

// Removing spec.imageUpdate removes what the last update reported: a
// pending change that will never be committed is not left in the status.
func TestImageUpdateStatusIsClearedWhenTheFieldIsRemoved(t *testing.T) {
	f := newUpdateFixture(t, markedApp, &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdateReport})
	if s := f.reconcile(t); s.Status.ImageUpdate == nil || len(s.Status.ImageUpdate.Pending) != 1 {
		t.Fatalf("status.imageUpdate = %+v, want one pending change", s.Status.ImageUpdate)
	}
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(f.sync), &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.ImageUpdate = nil
	if err := c.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	if got := f.reconcile(t).Status.ImageUpdate; got != nil {
		t.Errorf("status.imageUpdate = %+v after spec.imageUpdate was removed, want it gone", got)
	}
}

// A tenant's Sync (outside the agent's namespace) may name only the
// ImagePolicies of its own namespace: a marker naming another namespace's
// policy is reported with its file and line and left alone, whether that
// policy exists or not; the agent's own Syncs may name any.
func TestImageUpdateFencesATenantToItsOwnPolicies(t *testing.T) {
	other := env.Namespace(t)
	p := &v1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: other}, Spec: semver("registry.example.com/app", "^1")}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	p.Status.LatestTag = "1.5.0"
	if err := c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	files := func(ns string) map[string]string {
		return map[string]string{
			"apps/own.yaml":   "image: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"" + ns + ":app\"}\n",
			"apps/other.yaml": "# another team's policy\nimage: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"" + other + ":app\"}\n",
		}
	}
	for _, tc := range []struct {
		name         string
		agentsOwn    bool
		otherPending bool
	}{
		{"a tenant's Sync is refused another namespace's policy", false, false},
		{"the agent's own Sync may name a policy in any namespace", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newUpdateFixture(t, files, &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdateReport})
			f.r.AgentNamespace = "driftless-system"
			if tc.agentsOwn {
				f.r.AgentNamespace = f.ns
			}
			u := f.reconcile(t).Status.ImageUpdate
			if u == nil {
				t.Fatal("no status.imageUpdate")
			}
			pending := map[string]string{}
			for _, ch := range u.Pending {
				pending[ch.File] = ch.New
			}
			if pending["apps/own.yaml"] != "registry.example.com/app:1.1.0" {
				t.Errorf("pending %+v, want apps/own.yaml updated to its namespace's policy's 1.1.0", u.Pending)
			}
			if _, ok := pending["apps/other.yaml"]; ok != tc.otherPending {
				t.Errorf("pending %+v: apps/other.yaml pending = %v, want %v", u.Pending, ok, tc.otherPending)
			}
			if tc.otherPending {
				if len(u.Problems) != 0 {
					t.Errorf("problems %q, want none", u.Problems)
				}
				return
			}
			want := "apps/other.yaml:2: ImagePolicy " + other + "/app: is in another namespace: a Sync outside the agent's namespace may use only the ImagePolicies of its own namespace, " + f.ns
			if len(u.Problems) != 1 || !strings.HasPrefix(u.Problems[0], want) {
				t.Errorf("problems %q, want one starting %q", u.Problems, want)
			}
		})
	}
}
