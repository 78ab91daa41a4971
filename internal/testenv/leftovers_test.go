package testenv

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// The child test binary of TestTestBinaryLeavesNothingRunning runs
// TestLeftoversChild in the mode named by childModeEnv, on a control plane
// with workloads when childWorkloadsEnv is set (see TestMain).
const (
	childModeEnv      = "DRIFTLESS_TESTENV_LEFTOVERS_CHILD"
	childWorkloadsEnv = "DRIFTLESS_TESTENV_LEFTOVERS_WORKLOADS"
)

// TestTestBinaryLeavesNothingRunning runs a test binary that starts a
// control plane (TestMain) and a git server with a git process serving a
// fetch, ends it the ways a test run ends, and checks that none of the
// processes it started is left running.
func TestTestBinaryLeavesNothingRunning(t *testing.T) {
	tests := []struct {
		name      string
		mode      string
		timeout   string // the child's -test.timeout
		workloads bool
		kill      bool // SIGKILL the child instead of letting it go on
		wantCode  int  // -1: killed by a signal
		wantOut   string
	}{
		{name: "a passing test stops them", mode: "pass", wantCode: 0, wantOut: "PASS"},
		{name: "a failing test stops them", mode: "fail", wantCode: 1, wantOut: "failing on purpose"},
		{name: "a panicking test takes them with it", mode: "panic", wantCode: 2, wantOut: "panic: panicking on purpose"},
		{name: "a test that times out takes them with it", mode: "timeout", timeout: "10s", wantCode: 2, wantOut: "panic: test timed out after 10s"},
		{name: "a test binary killed with SIGKILL takes them with it, workload components too", mode: "kill", workloads: true, kill: true, wantCode: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Everything the child creates, and so every command line
			// of what it starts, is under its own TMPDIR.
			tmp := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			timeout := cmp.Or(tc.timeout, "5m")
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLeftoversChild$", "-test.timeout="+timeout)
			cmd.Env = append(os.Environ(), childModeEnv+"="+tc.mode, "TMPDIR="+tmp)
			want := []string{"etcd", "kube-apiserver", "git upload-pack"}
			if tc.workloads {
				cmd.Env = append(cmd.Env, childWorkloadsEnv+"=1")
				want = append(want, "kube-controller-manager", "kube-scheduler", "kwok")
			}
			child := startChild(t, cmd)

			if err := child.waitReady(3 * time.Minute); err != nil {
				t.Fatal(err)
			}
			running, _ := leftovers(t, tmp)
			for _, name := range want {
				if !slices.Contains(names(running), name) {
					t.Errorf("while the child runs, found %v under %s; want %s among them", names(running), tmp, name)
				}
			}

			if tc.kill {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			} else {
				child.stdin.Close() // lets TestLeftoversChild go on to pass, fail, panic or time out
			}
			out, code := child.wait()
			if code != tc.wantCode || !strings.Contains(out, tc.wantOut) {
				t.Errorf("child exited with %d, want %d and output with %q; output:\n%s", code, tc.wantCode, tc.wantOut, out)
			}

			// What the child started is gone, or going at once (SIGKILL
			// from the kernel); poll briefly for the latter.
			deadline := time.Now().Add(10 * time.Second)
			left, report := leftovers(t, tmp)
			for len(left) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				left, report = leftovers(t, tmp)
			}
			if len(left) > 0 {
				t.Errorf("after the child exited, still running:\n%s", report)
				killAll(left) // this test leaves nothing behind either
			}
		})
	}
}

// TestLeftoversChild is the child of TestTestBinaryLeavesNothingRunning.
// It keeps a git upload-pack running, prints "ready", waits until its
// standard input closes and then ends as its mode says.
func TestLeftoversChild(t *testing.T) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		t.Skip("runs only as the child of TestTestBinaryLeavesNothingRunning")
	}
	srv := NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "add app", map[string]string{"app.yaml": "kind: ConfigMap\n"})
	openUploadPack(t, srv, repo)
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	switch mode {
	case "fail":
		t.Fatal("failing on purpose")
	case "panic":
		panic("panicking on purpose")
	case "timeout", "kill":
		time.Sleep(time.Hour)
	}
}

// TestGitServerCloseWaitsForItsGitProcesses checks that Close returns only
// once the git processes serving open connections have exited and been
// reaped.
func TestGitServerCloseWaitsForItsGitProcesses(t *testing.T) {
	srv := NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	repo.Commit(t, "add app", map[string]string{"app.yaml": "kind: ConfigMap\n"})
	openUploadPack(t, srv, repo)
	running, _ := leftovers(t, repo.Bare)
	i := slices.Index(names(running), "git upload-pack")
	if i < 0 {
		t.Fatalf("found %v serving %s, want git upload-pack", names(running), repo.Bare)
	}
	pid, _, _ := strings.Cut(running[i], " ")

	srv.Close()
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Errorf("git upload-pack (pid %s) still there, running or unreaped, when Close returned", pid)
	}
	if left, report := leftovers(t, repo.Bare); len(left) > 0 {
		t.Errorf("after Close, still running:\n%s", report)
		killAll(left)
	}
}

// openUploadPack starts a fetch of repo over SSH and leaves it waiting for
// the client's wants, so that a git upload-pack runs until the connection
// closes.
func openUploadPack(t *testing.T, srv *GitServer, repo *Repo) {
	t.Helper()
	signer, err := ssh.ParsePrivateKey(srv.DeployKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ssh.Dial("tcp", srv.SSHAddr(), &ssh.ClientConfig{
		User:            "git",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(srv.HostKey),
	})
	if err != nil {
		t.Fatalf("dial git server: %v", err)
	}
	t.Cleanup(func() { client.Close() })
	session, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.StdinPipe(); err != nil { // held open: upload-pack waits for wants
		t.Fatal(err)
	}
	stdout, err := session.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := session.Start(fmt.Sprintf("git-upload-pack '%s.git'", repo.Name)); err != nil {
		t.Fatal(err)
	}
	// The first pkt-line of the ref advertisement: upload-pack runs.
	if _, err := io.ReadFull(stdout, make([]byte, 4)); err != nil {
		t.Fatalf("read ref advertisement: %v", err)
	}
}

// leftovers runs hack/check-no-leftovers.sh for needle and returns the
// processes it found, as "PID COMMAND" lines, and its report.
func leftovers(t *testing.T, needle string) ([]string, string) {
	t.Helper()
	out, err := exec.Command("bash", "../../hack/check-no-leftovers.sh", needle).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil, string(out)
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[1:], string(out) // after the summary line
	default:
		t.Fatalf("check-no-leftovers.sh: %v\n%s", err, out)
		return nil, ""
	}
}

// killAll sends SIGKILL to the processes of "PID COMMAND" lines.
func killAll(lines []string) {
	for _, line := range lines {
		pidText, _, _ := strings.Cut(line, " ")
		if pid, err := strconv.Atoi(pidText); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// names turns "PID COMMAND" lines into program names: the base name of
// the binary, with git's subcommand ("git upload-pack").
func names(lines []string) []string {
	var out []string
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		name := filepath.Base(fields[1])
		if name == "git" && len(fields) > 2 {
			name += " " + fields[2]
		}
		out = append(out, name)
	}
	return out
}

// child is a running child test binary.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{}
	done  chan struct{} // closed when stdout is at its end
	mu    sync.Mutex
	out   strings.Builder // stdout and stderr
}

func startChild(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = writerFunc(c.write)
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.write([]byte(sc.Text() + "\n"))
			if sc.Text() == "ready" {
				close(c.ready)
			}
		}
	}()
	return c
}

func (c *child) write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *child) waitReady(timeout time.Duration) error {
	select {
	case <-c.ready:
		return nil
	case <-c.done:
		_, code := c.wait()
		return fmt.Errorf("child exited with %d before it was ready; output:\n%s", code, c.output())
	case <-time.After(timeout):
		return fmt.Errorf("child not ready after %s; output:\n%s", timeout, c.output())
	}
}

// wait waits for the child to exit and returns its output and exit code
// (-1 when a signal ended it).
func (c *child) wait() (string, int) {
	<-c.done
	_ = c.cmd.Wait()
	return c.output(), c.cmd.ProcessState.ExitCode()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
