package reliability

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// driftlessBinary builds cmd/driftless once per test binary and returns
// its path.
var driftlessBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "driftless-reliability-bin-")
	if err != nil {
		return "", err
	}
	return testenv.BuildDriftless(dir)
})

// agentProcess is `driftless agent` as a process of its own, so that a
// test can SIGKILL it in the middle of a sync.
type agentProcess struct {
	cmd *exec.Cmd
	log string
}

// startAgentProcess starts the agent binary as agentUser with the flags
// every test needs; its log goes to a file in the test's directory.
func startAgentProcess(t *testing.T, namespace, cacheDir string) *agentProcess {
	t.Helper()
	return startAgentProcessAs(t, agentUser, namespace, cacheDir, "--leader-elect=false")
}

// startAgentProcessAs starts the agent binary as user (group
// system:masters) with the flags every test needs and args.
func startAgentProcessAs(t *testing.T, user, namespace, cacheDir string, args ...string) *agentProcess {
	t.Helper()
	kubeconfig, err := env.UserKubeconfig(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := driftlessBinary()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, append([]string{"agent",
		"--kubeconfig", kubeconfig,
		"--namespace", namespace, // the test's Syncs act as the agent
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--cache-dir", cacheDir,
	}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := testenv.StartTied(cmd); err != nil {
		t.Fatal(err)
	}
	a := &agentProcess{cmd: cmd, log: logPath}
	t.Cleanup(func() { a.kill() })
	return a
}

// kill sends SIGKILL: no deferred status write, no graceful shutdown.
func (a *agentProcess) kill() {
	if a.cmd.ProcessState != nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	_ = a.cmd.Wait()
}

// logTail is the end of the agent's log, for a failing test.
func (a *agentProcess) logTail() string {
	data, _ := os.ReadFile(a.log)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}
