package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultBinDir returns where the control plane binaries live: the
// directory named by DRIFTLESS_K8S_BIN or KUBEBUILDER_ASSETS, else bin/k8s
// at the root of the driftless checkout containing the working directory.
func DefaultBinDir() string {
	for _, env := range []string{"DRIFTLESS_K8S_BIN", "KUBEBUILDER_ASSETS"} {
		if dir := os.Getenv(env); dir != "" {
			return dir
		}
	}
	if root, err := RepoRoot(); err == nil {
		return filepath.Join(root, "bin", "k8s")
	}
	return filepath.Join("bin", "k8s")
}

// RepoRoot walks up from the working directory to the driftless module root.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/driftless/driftless\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the driftless checkout")
		}
		dir = parent
	}
}

// DetachedStatus describes a control plane started with Detach and
// Workloads, as hack/local-cluster.sh starts it.
type DetachedStatus struct {
	// Running lists the components whose recorded process is alive.
	Running []string
	// Stale lists the components with a pid file but no live process.
	Stale []string
	// Missing lists the components with no pid file.
	Missing []string
}

// Up reports whether every component is running.
func (s DetachedStatus) Up() bool { return len(s.Running) == len(components) }

// NotRunning lists the components that are not running, stale or missing.
func (s DetachedStatus) NotRunning() []string { return append(slices.Clone(s.Stale), s.Missing...) }

// StatusOf inspects the pid files in dir of a detached control plane whose
// binaries are in binDir.
func StatusOf(dir, binDir string) DetachedStatus {
	var st DetachedStatus
	for _, name := range components {
		pid, ok := readPID(filepath.Join(dir, name+".pid"))
		switch {
		case !ok:
			st.Missing = append(st.Missing, name)
		case ownedBy(pid, filepath.Join(binDir, name)):
			st.Running = append(st.Running, name)
		default:
			st.Stale = append(st.Stale, name)
		}
	}
	return st
}

// StopDetached stops the processes recorded in dir's pid files, newest
// first, and removes the pid files. A pid is signalled only when it still
// runs the binary it was started from, so a reused pid is never killed.
func StopDetached(dir, binDir string) ([]string, error) {
	var stopped []string
	var errs []error
	for _, name := range slices.Backward(components) {
		pidFile := filepath.Join(dir, name+".pid")
		pid, ok := readPID(pidFile)
		if !ok {
			continue
		}
		if ownedBy(pid, filepath.Join(binDir, name)) {
			if err := stopPID(pid, 20*time.Second); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			stopped = append(stopped, name)
		}
		if err := os.Remove(pidFile); err != nil {
			errs = append(errs, err)
		}
	}
	return stopped, errors.Join(errs...)
}

func readPID(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid, err == nil && pid > 0
}

// ownedBy reports whether pid is alive and executing binary.
func ownedBy(pid int, binary string) bool {
	if !processAlive(pid) {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	want, err := filepath.Abs(binary)
	if err != nil {
		return false
	}
	if resolved, err := filepath.EvalSymlinks(want); err == nil {
		want = resolved
	}
	return strings.TrimSuffix(exe, " (deleted)") == want
}

// StartDetachedProcess starts binary with args as a process of its own
// group that outlives the caller, logging to dir/name.log and recording
// its pid in dir/name.pid, for StopDetachedProcess.
func StartDetachedProcess(dir, name, binary string, env []string, args ...string) error {
	logFile, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600)
}

// DetachedProcessRunning reports whether the process recorded in
// dir/name.pid runs binary.
func DetachedProcessRunning(dir, name, binary string) bool {
	pid, ok := readPID(filepath.Join(dir, name+".pid"))
	return ok && ownedBy(pid, binary)
}

// StopDetachedProcess stops the process recorded in dir/name.pid (its
// group: SIGTERM, then SIGKILL after 20 s) when it still runs binary, and
// removes the pid file. It reports whether it stopped one.
func StopDetachedProcess(dir, name, binary string) (bool, error) {
	pidFile := filepath.Join(dir, name+".pid")
	pid, ok := readPID(pidFile)
	if !ok {
		return false, nil
	}
	stopped := false
	if ownedBy(pid, binary) {
		if err := stopPID(pid, 20*time.Second); err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		stopped = true
	}
	return stopped, os.Remove(pidFile)
}
