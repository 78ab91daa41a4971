package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/agent/agenttest"
)

// The agent's own behaviour is tested in internal/agent; these tests
// check what `driftless agent` makes of its flags, and what the other
// commands' tests need of a running agent.

// A Flux v1 user keeps the flags of their Deployment: they become the root
// Sync's options (internal/agent tests that the agent creates the root
// Sync from them and keeps the cluster equal to git).
func TestAgentFluxV1FlagsBecomeTheRootSyncOptions(t *testing.T) {
	cacheDir := t.TempDir()
	o := agentFlags(t, io.Discard,
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", "flux",
		"--git-url", "ssh://git@git.example.com/fleet.git",
		"--git-branch", "main",
		"--git-path", "namespaces,workloads",
		"--sync-interval", "2s",
		"--git-secret", "git-deploy",
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
		"--cache-dir", cacheDir,
	)
	type fromFlags struct {
		Host                   string
		Namespace              string
		GitURL, GitBranch      string
		GitPaths               []string
		SyncInterval           time.Duration
		GitSecret              string
		MetricsAddr, ProbeAddr string
		LeaderElect            bool
		CacheDir               string
	}
	want := fromFlags{
		Host: env.Config.Host, Namespace: "flux",
		GitURL: "ssh://git@git.example.com/fleet.git", GitBranch: "main", GitPaths: []string{"namespaces", "workloads"},
		SyncInterval: 2 * time.Second, GitSecret: "git-deploy",
		MetricsAddr: "0", ProbeAddr: "0", LeaderElect: false, CacheDir: cacheDir,
	}
	got := fromFlags{
		Namespace: o.Namespace, GitURL: o.GitURL, GitBranch: o.GitBranch, GitPaths: o.GitPaths,
		SyncInterval: o.SyncInterval, GitSecret: o.GitSecret,
		MetricsAddr: o.MetricsAddr, ProbeAddr: o.ProbeAddr, LeaderElect: o.LeaderElect, CacheDir: o.CacheDir,
	}
	if o.Config != nil {
		got.Host = o.Config.Host
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the agent's options do not mirror the flags (-want +got):\n%s", diff)
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

func TestAgentRefusesAWebhookAddressWithoutASecretBeforeConnecting(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute([]string{"agent", "--webhook-bind-address", "127.0.0.1:0", "--kubeconfig", "/nonexistent/kubeconfig"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "needs --webhook-secret") {
		t.Errorf("exit %d, %q; want 2 saying --webhook-secret is needed", code, errOut.String())
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
	return agenttest.AppliedAt(c, key, revision)
}

// configValue returns the greeting of a ConfigMap, or "" if it does not
// exist.
func configValue(t *testing.T, namespace, name string) string {
	t.Helper()
	return agenttest.Greeting(t, c, namespace, name)
}

func configMapIn(namespace, name, greeting string) string {
	return agenttest.ConfigMap(namespace, name, greeting)
}

// kubectl runs the real kubectl against the test control plane and
// returns its stdout and stderr.
func kubectl(t *testing.T, extraEnv []string, args ...string) (string, string, error) {
	t.Helper()
	return env.ControlPlane.Kubectl(extraEnv, args...)
}
