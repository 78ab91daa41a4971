// Package installtest runs `driftless install` against a control plane
// that runs Pods (a simulated node), so that the agent's Deployment
// becomes available, which the control plane of package cli cannot do.
package installtest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/cli"
	"github.com/driftless/driftless/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainWithWorkloads(m, &env, nil) }

// install waits until the agent's Deployment is available, saying so,
// and only then prints the public key to add as a deploy key.
func TestInstallWaitsForTheAgentDeploymentToBeAvailable(t *testing.T) {
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	var out, errOut bytes.Buffer
	code := cli.Execute([]string{"install", "--kubeconfig", env.ControlPlane.KubeconfigPath(), "--namespace", ns,
		"--git-url", repo.SSHURL(), "--git-branch", "main", "--git-path", "clusters/local,apps", "--sync-interval", "1m", "--timeout", "2m"}, &out, &errOut)
	t.Logf("stderr:\n%s\nstdout:\n%s", errOut.String(), out.String())
	if code != 0 {
		t.Fatalf("install exited %d", code)
	}
	for _, want := range []string{"waiting up to 2m0s for Deployment " + ns + "/driftless to be available", "Deployment " + ns + "/driftless is available"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("install does not say %q", want)
		}
	}
	if !strings.Contains(out.String(), "read-only deploy key:\n\nssh-ed25519 ") {
		t.Errorf("install does not print the public key:\n%s", out.String())
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "driftless"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 1 {
		t.Errorf("available replicas = %d, want 1", d.Status.AvailableReplicas)
	}
}

// On a cluster where the agent runs, every check passes.
func TestCheckPassesOnAnInstalledAndAvailableAgent(t *testing.T) {
	ns := env.Namespace(t)
	kubeconfig := env.ControlPlane.KubeconfigPath()
	var out, errOut bytes.Buffer
	if code := cli.Execute([]string{"install", "--kubeconfig", kubeconfig, "--namespace", ns, "--git-url", "https://example.com/fleet.git", "--timeout", "2m"}, &out, &errOut); code != 0 {
		t.Fatalf("install exited %d: %s", code, errOut.String())
	}
	out.Reset()
	code := cli.Execute([]string{"check", "--kubeconfig", kubeconfig, "--namespace", ns}, &out, &errOut)
	t.Logf("check:\n%s", out.String())
	if code != 0 || strings.Contains(out.String(), "FAIL") {
		t.Errorf("check exited %d:\n%s", code, out.String())
	}
}
