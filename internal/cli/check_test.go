package cli

import (
	"strings"
	"testing"
)

// check passes the version, the CRD and the permissions of an installed
// agent, and fails on a Deployment that is not available (this control
// plane runs no Pods); for a namespace with no agent it names what the
// service account may not do.
func TestCheckReportsVersionPermissionsAndTheAgentsHealth(t *testing.T) {
	diffClusterClient(t)
	kubeconfig := env.ControlPlane.KubeconfigPath()
	ns := env.Namespace(t)
	runCLI(t, "install", "--kubeconfig", kubeconfig, "--namespace", ns, "--git-url", "https://example.com/fleet.git", "--wait=false").expect(t, 0)

	r := runCLI(t, "check", "--kubeconfig", kubeconfig, "--namespace", ns).expect(t, 1)
	for _, want := range []string{
		"ok    Kubernetes v1.",
		"ok    the Sync CRD syncs.driftless.dev is established",
		"ok    system:serviceaccount:" + ns + ":driftless may do all ",
		"FAIL  the agent's Deployment " + ns + "/driftless: 0 of 1 replicas updated and available",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("check does not say %q:\n%s", want, r.out)
		}
	}

	bare := env.Namespace(t)
	r = runCLI(t, "check", "--kubeconfig", kubeconfig, "--namespace", bare).expect(t, 1)
	for _, want := range []string{
		"FAIL  system:serviceaccount:" + bare + ":driftless may not get syncs.driftless.dev;",
		"FAIL  system:serviceaccount:" + bare + ":driftless may not create secrets in " + bare + ";",
		"FAIL  the agent's Deployment " + bare + "/driftless:",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("check does not say %q:\n%s", want, r.out)
		}
	}
}
