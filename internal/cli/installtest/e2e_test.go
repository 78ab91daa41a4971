package installtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/cli"
	"github.com/driftless/driftless/internal/testenv"
)

// A new user installs driftless against a git server over SSH, adds the
// printed public key as the repository's deploy key and commits a
// ConfigMap: the agent, running in its Pod as the ServiceAccount install
// made, applies it, reverts a hand edit, passes `driftless check`, and
// stops when uninstalled. Nobody writes YAML but the ConfigMap in git.
//
// It installs into driftless-system, as a user would, so that its
// transcript (go test -v) is the walk-through of docs/cli.md.
func TestANewUserInstallsAgainstTheLocalGitServerAndIsSynced(t *testing.T) {
	ctx := context.Background()
	const agentNS = "driftless-system"
	ns := env.Namespace(t) // of the ConfigMap in git
	kubeconfig := env.ControlPlane.KubeconfigPath()
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	knownHosts := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(knownHosts, srv.KnownHosts(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(env.PodRunner.Dir, agentNS+"_*.log"))
			for _, l := range logs {
				data, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), data)
			}
		}
	})
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.Execute(append(args, "--kubeconfig", kubeconfig), &out, &errOut)
		t.Logf("$ driftless %s\n%s%s(exit %d)", strings.Join(args, " "), errOut.String(), out.String(), code)
		return code, out.String(), errOut.String()
	}

	// Whatever happens, the next tests find no agent in driftless-system.
	t.Cleanup(func() { run("uninstall", "--timeout", "2m") })
	code, out, _ := run("install", "--git-url", repo.SSHURL(), "--git-branch", "main", "--git-path", "apps",
		"--sync-interval", "5s", "--known-hosts", knownHosts, "--timeout", "2m")
	if code != 0 {
		t.Fatalf("install exited %d", code)
	}
	public := ""
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "ssh-ed25519 ") {
			public = strings.TrimSpace(line)
		}
	}
	if public == "" {
		t.Fatalf("install printed no public key:\n%s", out)
	}
	// The user's step: add the deploy key to the repository.
	if err := srv.AuthorizeKey(public); err != nil {
		t.Fatal(err)
	}
	repo.Commit(t, "greeting", map[string]string{"apps/greeting.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: greeting
  namespace: ` + ns + `
data:
  greeting: hello from git
`})

	scheme := testenv.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	agentPID := agentProcess(t, agentNS)
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "greeting"}
	testenv.Eventually(t, 90*time.Second, "the agent applies the ConfigMap and the Sync is Ready", func() string {
		var s v1alpha1.Sync
		if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "default"}, &s); err != nil {
			return "Sync default: " + err.Error()
		}
		if !apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) {
			return "Sync not Ready: " + conditionMessage(s.Status.Conditions)
		}
		if err := c.Get(ctx, key, cm); err != nil {
			return "ConfigMap: " + err.Error()
		}
		return ""
	})
	if got, want := cm.Labels[v1alpha1.SyncLabel], v1alpha1.SyncLabelValue(agentNS, "default"); got != want {
		t.Errorf("label %s = %q, want %q", v1alpha1.SyncLabel, got, want)
	}
	if !managedBy(cm, "driftless") {
		t.Errorf("the ConfigMap's fields are not managed by driftless: %v", cm.ManagedFields)
	}

	if code, _, _ := run("get", "syncs", "-n", agentNS); code != 0 {
		t.Errorf("get syncs exited %d", code)
	}
	if code, _, _ := run("explain", "configmap/greeting", "-n", ns); code != 0 {
		t.Errorf("explain exited %d", code)
	}

	// A hand edit comes back.
	edit := cm.DeepCopy()
	edit.Data["greeting"] = "by hand"
	if err := c.Update(ctx, edit, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the agent reverts the hand edit", func() string {
		if err := c.Get(ctx, key, cm); err != nil {
			return err.Error()
		}
		if cm.Data["greeting"] != "hello from git" {
			return "greeting is " + cm.Data["greeting"]
		}
		return ""
	})

	if code, out, _ := run("check"); code != 0 || strings.Contains(out, "FAIL") {
		t.Errorf("check exited %d:\n%s", code, out)
	}

	if code, _, _ := run("uninstall", "--timeout", "2m"); code != 0 {
		t.Fatalf("uninstall exited %d", code)
	}
	testenv.Eventually(t, 30*time.Second, "the agent's process stops", func() string {
		for pod := range env.PodRunner.Processes() {
			if strings.HasPrefix(pod, agentNS+"/") {
				return "the pod runner still runs " + pod
			}
		}
		if syscall.Kill(agentPID, 0) == nil {
			return "the agent's process still runs"
		}
		return ""
	})
}

// agentProcess waits for the pod runner to run the agent of namespace ns
// and returns its pid.
func agentProcess(t *testing.T, ns string) int {
	t.Helper()
	pid := 0
	testenv.Eventually(t, 30*time.Second, "the pod runner runs the agent", func() string {
		for pod, p := range env.PodRunner.Processes() {
			if strings.HasPrefix(pod, ns+"/driftless-") {
				pid = p
				return ""
			}
		}
		return "no process for a Pod of " + ns
	})
	return pid
}

func managedBy(obj client.Object, manager string) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == manager {
			return true
		}
	}
	return false
}

func conditionMessage(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, c.Type+"="+string(c.Status)+" "+c.Reason+": "+c.Message)
	}
	return strings.Join(parts, "; ")
}
