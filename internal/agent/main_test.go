package agent_test

import (
	"bytes"
	"net"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/cli"
	"github.com/driftless/driftless/internal/testenv"
)

// The tests of this package run a real agent (agenttest) against a real
// API server, git server and kubectl, and check what a user of the agent
// sees: the cluster equal to git, the admission webhook's answers to
// kubectl, the webhook receiver's answers to a forge.

var (
	env *testenv.Env
	// c reads and writes as a user would; it knows Syncs, whose CRD the
	// agent under test installs.
	c client.Client
)

func TestMain(m *testing.M) { testenv.MainWith(m, &env, setup) }

func setup(e *testenv.Env) error {
	var err error
	c, err = client.New(e.Config, client.Options{Scheme: testenv.Scheme()})
	return err
}

// kubectl runs the real kubectl against the test control plane and
// returns its stdout and stderr.
func kubectl(t *testing.T, extraEnv []string, args ...string) (string, string, error) {
	t.Helper()
	return env.ControlPlane.Kubectl(extraEnv, args...)
}

// reconcile runs `driftless reconcile key --wait` against the test
// control plane, as a user asks for a sync now, and fails the test unless
// it exits 0.
func reconcile(t *testing.T, key string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := cli.Execute([]string{"reconcile", key, "--wait", "--timeout", "1m", "--kubeconfig", env.ControlPlane.KubeconfigPath()}, &out, &errOut); code != 0 {
		t.Fatalf("driftless reconcile %s: exit code = %d, want 0\nstdout:\n%s\nstderr:\n%s", key, code, out.String(), errOut.String())
	}
}

// loopbackAddr returns a loopback address with a port free a moment ago.
func loopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
