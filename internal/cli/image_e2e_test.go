package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/notify"
	"github.com/driftless/driftless/internal/testenv"
)

func markedDeployment(name, image string, policyNS string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: app
        image: %[2]s # {"$imagepolicy": "%[3]s:app"}
`, name, image, policyNS)
}

// The whole loop with the real agent: a new tag in the registry becomes a
// commit in git (author and message as configured, signed with the
// Sync's OpenPGP key), which the Sync, verifying every revision it
// applies, accepts and applies to the cluster; beside it, a Sync in
// Report mode only says what it would commit.
func TestAgentImageUpdateCommitsANewTagAndTheClusterRunsIt(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	reg := testenv.NewRegistry(t)
	reg.Push(t, "app", "1.0.0")
	image := reg.Host() + "/app"

	srv := testenv.NewGitServer(t)
	commitRepo, reportRepo := srv.NewRepo(t, "fleet"), srv.NewRepo(t, "report")
	// A person signs the first commit with their SSH key; the robot signs
	// its commits with an OpenPGP key; the Sync trusts both.
	human := testenv.NewSSHSigningKey(t)
	robot := testenv.NewOpenPGPKey(t, "Image Bot", "bot@example.com", "")
	commitRepo.SignedCommit(t, human, "app", map[string]string{"apps/app.yaml": markedDeployment("app", image+":1.0.0", ns)})
	for name, data := range map[string]map[string][]byte{
		"trusted":   {"allowed_signers": []byte(human.AllowedSigner + "\n"), "robot.asc": []byte(robot.ArmoredPublic)},
		"robot-key": {"git.asc": []byte(robot.ArmoredPrivate)},
	} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	reportHead := reportRepo.Commit(t, "app", map[string]string{"apps/app.yaml": markedDeployment("reported", image+":1.0.0", ns)})
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		Data:       map[string][]byte{"identity": srv.DeployKey, "known_hosts": srv.KnownHosts()},
	}); err != nil {
		t.Fatal(err)
	}
	// A generic notification target receives what image automation does.
	var mu sync.Mutex
	var notices []notify.GenericBody
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body notify.GenericBody
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("notification body: %v", err)
		}
		mu.Lock()
		notices = append(notices, body)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	notifyConfig := filepath.Join(t.TempDir(), "notify.yaml")
	if err := os.WriteFile(notifyConfig, []byte("targets:\n- name: ops\n  type: generic\n  url: "+hook.URL+
		"\n  events: [image-updated, image-update-failed]\n  syncs:\n    namespaces: ["+ns+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	imageNotices := func() []notify.GenericBody {
		mu.Lock()
		defer mu.Unlock()
		return append([]notify.GenericBody(nil), notices...)
	}
	a := startAgent(t,
		"--notify-config", notifyConfig,
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", ns,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
		"--cache-dir", t.TempDir(),
	)
	// The agent installs the ImagePolicy CRD at start.
	policy := &v1alpha1.ImagePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1alpha1.ImagePolicySpec{Image: image, Insecure: true, Interval: metav1.Duration{Duration: time.Second},
			Policy: v1alpha1.ImagePolicyChoice{SemVer: &v1alpha1.SemVerPolicy{Range: "^1"}}},
	}
	a.Eventually("the ImagePolicy can be created", func() string {
		if err := c.Create(ctx, policy); err != nil {
			return err.Error()
		}
		return ""
	})
	sync := func(name string, repo *testenv.Repo, mode v1alpha1.ImageUpdateMode) *v1alpha1.Sync {
		return &v1alpha1.Sync{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.SyncSpec{
				Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.SSHURL(), Branch: "main",
					SecretRef: &v1alpha1.LocalObjectReference{Name: "git"}}},
				Paths:           []string{"apps"},
				Interval:        metav1.Duration{Duration: time.Minute},
				TargetNamespace: ns,
				ImageUpdate: &v1alpha1.ImageUpdateSpec{Mode: mode,
					Author:  &v1alpha1.CommitAuthor{Name: "Image Bot", Email: "bot@example.com"},
					Message: "images: {{range .Changes}}{{.New}} by {{.Policy}}{{end}}"},
			},
		}
	}
	signed := sync("fleet", commitRepo, v1alpha1.ImageUpdateCommit)
	signed.Spec.Source.Git.Verify = &v1alpha1.GitVerification{Mode: v1alpha1.VerifyHEAD, SecretRef: v1alpha1.LocalObjectReference{Name: "trusted"}}
	signed.Spec.ImageUpdate.SigningKey = &v1alpha1.SigningKey{SecretRef: v1alpha1.LocalObjectReference{Name: "robot-key"}}
	for _, s := range []*v1alpha1.Sync{signed, sync("report", reportRepo, v1alpha1.ImageUpdateReport)} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	deploymentImage := func(name string) string {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil || len(d.Spec.Template.Spec.Containers) == 0 {
			return fmt.Sprint(err)
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	a.Eventually("the Deployment runs 1.0.0 from git", func() string {
		if got := deploymentImage("app"); got != image+":1.0.0" {
			return "image " + got
		}
		return ""
	})

	reg.Push(t, "app", "1.2.3")
	a.Eventually("a commit with the new tag appears in git", func() string {
		msg := strings.TrimSpace(gitIn(t, commitRepo.Bare, "log", "-1", "--format=%an <%ae>|%s", "main"))
		if want := "Image Bot <bot@example.com>|images: " + image + ":1.2.3 by " + ns + "/app"; msg != want {
			return fmt.Sprintf("last commit %q, want %q", msg, want)
		}
		return ""
	})
	if raw := gitIn(t, commitRepo.Bare, "cat-file", "commit", "main"); !strings.Contains(raw, "-----BEGIN PGP SIGNATURE-----") {
		t.Errorf("the robot's commit is not signed:\n%s", raw)
	}
	if got := gitIn(t, commitRepo.Bare, "show", "main:apps/app.yaml"); !strings.Contains(got, image+":1.2.3 # {\"$imagepolicy\"") {
		t.Errorf("apps/app.yaml on main:\n%s\nwant the marked image at 1.2.3 with its marker", got)
	}
	head := strings.TrimSpace(gitIn(t, commitRepo.Bare, "rev-parse", "main"))
	a.Eventually("the notification target hears of the robot's commit", func() string {
		for _, n := range imageNotices() {
			if n.Sync == "fleet" && n.Event == notify.ImageUpdated && strings.Contains(n.Message, "committed "+head[:7]) &&
				strings.Contains(n.Message, image+":1.2.3") {
				return ""
			}
		}
		return fmt.Sprintf("notifications so far: %+v", imageNotices())
	})
	a.Eventually("the Sync verifies the robot's commit and the cluster runs 1.2.3", func() string {
		if got := deploymentImage("app"); got != image+":1.2.3" {
			return "image " + got
		}
		return ""
	})

	// Report mode: the status lists the change, an event says it, and
	// nothing is pushed.
	a.Eventually("the report Sync lists the pending change", func() string {
		var s v1alpha1.Sync
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "report"}, &s); err != nil {
			return err.Error()
		}
		if u := s.Status.ImageUpdate; u == nil || len(u.Pending) != 1 || u.Pending[0].New != image+":1.2.3" {
			return fmt.Sprintf("status.imageUpdate = %+v", u)
		}
		return ""
	})
	a.Eventually("an event says what Report mode would commit", func() string {
		return eventOn(ns, "report", "would commit to branch main: apps/app.yaml:15")
	})
	for _, n := range imageNotices() {
		if n.Sync != "fleet" || n.Event != notify.ImageUpdated {
			t.Errorf("unexpected notification (Report mode sends none, nothing failed): %+v", n)
		}
	}
	if head := strings.TrimSpace(gitIn(t, reportRepo.Bare, "rev-parse", "main")); head != reportHead {
		t.Errorf("Report mode moved main from %s to %s", reportHead, head)
	}
	if got := deploymentImage("reported"); got != image+":1.0.0" {
		t.Errorf("the reported Deployment runs %s, want 1.0.0 still", got)
	}
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := testenv.GitCommand(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// eventOn returns "" when an Event on Sync namespace/name has a note
// containing want, else what it saw.
func eventOn(namespace, name, want string) string {
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == v1alpha1.SyncKind && e.Regarding.Name == name {
			if strings.Contains(e.Note, want) {
				return ""
			}
			notes = append(notes, e.Note)
		}
	}
	return fmt.Sprintf("no note contains %q; notes: %q", want, notes)
}
