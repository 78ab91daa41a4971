package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
)

// A Flux v1 user swaps the image and command of their Deployment and keeps
// the flags: the agent must create the root Sync from them and keep the
// cluster equal to git, commit after commit and edit after edit.
func TestAgentWithFluxV1FlagsKeepsTheClusterEqualToGit(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	appNS := ns + "-app"
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}})
	})
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	deployKey := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git-deploy", Namespace: ns},
		Data:       map[string][]byte{"identity": srv.DeployKey, "known_hosts": srv.KnownHosts()},
	}
	if err := c.Create(ctx, deployKey); err != nil {
		t.Fatal(err)
	}
	first := repo.Commit(t, "initial", map[string]string{
		"namespaces/app.yaml":   "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + appNS + "\n",
		"workloads/config.yaml": configMapIn(appNS, "web-config", "v1"),
		"workloads/web.yaml":    deploymentIn(appNS, "web"),
		"elsewhere/extra.yaml":  configMapIn(appNS, "not-in-a-git-path", "v1"),
	})

	a := startAgent(t,
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", ns,
		"--git-url", repo.SSHURL(),
		"--git-branch", "main",
		"--git-path", "namespaces,workloads",
		"--sync-interval", "2s",
		"--git-secret", "git-deploy",
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
		"--cache-dir", t.TempDir(),
	)
	root := client.ObjectKey{Namespace: ns, Name: "default"}

	// The root Sync mirrors the flags.
	var sync v1alpha1.Sync
	a.Eventually("the root Sync is created", func() string {
		if err := c.Get(ctx, root, &sync); err != nil {
			return err.Error()
		}
		return ""
	})
	type fromFlags struct {
		Source   v1alpha1.Source
		Paths    []string
		Interval time.Duration
	}
	want := fromFlags{
		Source: v1alpha1.Source{Git: v1alpha1.GitSource{
			URL:       repo.SSHURL(),
			Branch:    "main",
			SecretRef: &v1alpha1.LocalObjectReference{Name: "git-deploy"},
		}},
		Paths:    []string{"namespaces", "workloads"},
		Interval: 2 * time.Second,
	}
	got := fromFlags{Source: sync.Spec.Source, Paths: sync.Spec.Paths, Interval: sync.Spec.Interval.Duration}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("root Sync spec does not mirror the flags (-want +got):\n%s", diff)
	}

	// The first commit is applied, and only its git paths.
	a.Eventually("the root Sync is Ready at the first commit", syncAppliedAt(root, first))
	if v := configValue(t, appNS, "web-config"); v != "v1" {
		t.Errorf("web-config greeting = %q, want v1", v)
	}
	var web appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: appNS, Name: "web"}, &web); err != nil {
		t.Errorf("the Deployment from workloads/ was not applied: %v", err)
	} else if web.Spec.Replicas == nil || *web.Spec.Replicas != 0 {
		t.Errorf("Deployment web replicas = %v, want 0", web.Spec.Replicas)
	}
	if v := configValue(t, appNS, "not-in-a-git-path"); v != "" {
		t.Error("a ConfigMap outside --git-path was applied")
	}
	a.Eventually("an Event on the root Sync reports the first commit", syncEventContains(ns, "applied "+first[:7]+": "))

	// A new commit is applied at the next interval, with no other nudge.
	second := repo.Commit(t, "new greeting", map[string]string{"workloads/config.yaml": configMapIn(appNS, "web-config", "v2")})
	a.Eventually("the root Sync is Ready at the second commit", syncAppliedAt(root, second))
	if v := configValue(t, appNS, "web-config"); v != "v2" {
		t.Errorf("web-config greeting after the second commit = %q, want v2", v)
	}

	// A hand edit is put back by a later interval.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: appNS, Name: "web-config"}, &cm); err != nil {
			return err
		}
		cm.Data["greeting"] = "edited by hand"
		return c.Update(ctx, &cm, client.FieldOwner("kubectl-edit"))
	})
	if err != nil {
		t.Fatalf("edit web-config: %v", err)
	}
	a.Eventually("the hand edit of web-config is reverted", func() string {
		if v := configValue(t, appNS, "web-config"); v != "v2" {
			return fmt.Sprintf("greeting = %q, want v2 from git", v)
		}
		return ""
	})

	if err := a.Stop(); err != nil {
		t.Errorf("the agent did not shut down cleanly: %v", err)
	}
}

func TestAgentRefusesAnUnknownLogFormatBeforeConnecting(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute([]string{"agent", "--log-format=yaml", "--kubeconfig", "/nonexistent/kubeconfig", "--git-url", "ssh://git@example.com/fleet.git"}, &out, &errOut)
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "use text or json") {
		t.Errorf("error does not say what to do: %q", errOut.String())
	}
}

func TestAgentRefusesLeaderElectionTimingsOutOfOrderBeforeConnecting(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute([]string{"agent", "--leader-elect", "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s",
		"--kubeconfig", "/nonexistent/kubeconfig"}, &out, &errOut)
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "--leader-elect-renew-deadline 10s, --leader-elect-lease-duration 5s: each must be shorter than the next") {
		t.Errorf("error does not name the flags and what to do: %q", errOut.String())
	}
}

// runningAgent is `driftless agent` running in the test's process.
type runningAgent = agenttest.Agent

// startAgent runs `driftless agent args...` until it is stopped or the
// test ends.
func startAgent(t *testing.T, args ...string) *runningAgent {
	t.Helper()
	return startAgentLogging(t, io.Discard, args...)
}

// startAgentLogging is startAgent with the agent's log (its standard
// error) in log.
func startAgentLogging(t *testing.T, log io.Writer, args ...string) *runningAgent {
	t.Helper()
	return agenttest.Start(t, agentFlags(t, log, args...))
}

// agentFlags returns the options `driftless agent args...` runs, with its
// log in log.
func agentFlags(t *testing.T, log io.Writer, args ...string) agent.Options {
	t.Helper()
	var got agent.Options
	cmd := agentCommand(func(_ context.Context, o agent.Options) error {
		got = o
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(log)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("driftless agent %s: %v", strings.Join(args, " "), err)
	}
	return got
}

// syncAppliedAt checks that the Sync is Ready=True at revision.
func syncAppliedAt(key client.ObjectKey, revision string) func() string {
	return func() string {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), key, &s); err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || s.Status.LastAppliedRevision != revision {
			return fmt.Sprintf("Ready = %+v, lastAppliedRevision = %q, want True at %s", ready, s.Status.LastAppliedRevision, revision)
		}
		return ""
	}
}

// syncEventContains checks that an Event on the root Sync in namespace
// has a note containing want.
func syncEventContains(namespace, want string) func() string {
	return func() string {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			return err.Error()
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == v1alpha1.SyncKind && e.Regarding.Name == "default" {
				if strings.Contains(e.Note, want) {
					return ""
				}
				notes = append(notes, e.Note)
			}
		}
		return fmt.Sprintf("no note contains %q; notes: %q", want, notes)
	}
}

// configValue returns the greeting of a ConfigMap, or "" if it does not
// exist.
func configValue(t *testing.T, namespace, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return ""
		}
		t.Fatalf("get ConfigMap %s/%s: %v", namespace, name, err)
	}
	return cm.Data["greeting"]
}

func configMapIn(namespace, name, greeting string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  greeting: %q\n", name, namespace, greeting)
}

func deploymentIn(namespace, name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      containers:
      - name: app
        image: nginx:1.27
`, namespace, name)
}
