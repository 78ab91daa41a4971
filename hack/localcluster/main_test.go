package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/driftless/driftless/internal/testenv"
)

// TestUpThenDownLeavesNothingBehind drives hack/local-cluster.sh the way a
// developer does, checks that the cluster runs a Deployment on its simulated
// node and the driftless image's Pods as processes, and that down stops
// every process up started (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok, the pod runner and what it runs) and frees every
// port they listen on.
func TestUpThenDownLeavesNothingBehind(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		testenv.MissingTool(t, "bash is not installed: hack/local-cluster.sh is not tested")
	}
	dir := t.TempDir()
	script, _ := filepath.Abs("../local-cluster.sh")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), "DRIFTLESS_LOCAL_DIR="+dir)
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	t.Cleanup(func() { _, _ = run("down") })

	out, err := run("up")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if !strings.HasSuffix(out, kubeconfig) {
		t.Errorf("up printed %q, want the kubeconfig path %s", out, kubeconfig)
	}
	if out, err := run("status"); err != nil || !strings.HasPrefix(out, "up:") {
		t.Errorf("status after up = %q, %v; want up", out, err)
	}
	kubectl := filepath.Join(filepath.Dir(script), "..", "bin", "k8s", "kubectl")
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "ns", "kube-system", "-o", "name").CombinedOutput(); err != nil ||
		strings.TrimSpace(string(out)) != "namespace/kube-system" {
		t.Errorf("kubectl get ns: %v\n%s", err, out)
	}

	// kwok's node is Ready, and the controller-manager and scheduler run
	// Pods on it.
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "node", "kwok-node-0",
		"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`).CombinedOutput(); err != nil || string(out) != "True" {
		t.Errorf("kubectl get node kwok-node-0 Ready = %q, %v; want True", out, err)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "create", "deployment", "web", "--image=registry.invalid/web:1").CombinedOutput(); err != nil {
		t.Errorf("kubectl create deployment: %v\n%s", err, out)
	} else if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "wait", "deployment/web",
		"--for=condition=Available", "--timeout=60s").CombinedOutput(); err != nil {
		t.Errorf("deployment did not become available: %v\n%s", err, out)
	}

	// The pod runner runs a Pod of the driftless image: its process ran
	// the locally built binary (exit status 0) and logged what it printed.
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "create", "deployment", "version",
		"--image=ghcr.io/driftless/driftless:latest", "--", "driftless", "version").CombinedOutput(); err != nil {
		t.Errorf("kubectl create deployment: %v\n%s", err, out)
	}
	var podLog string
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		logs, _ := filepath.Glob(filepath.Join(dir, "pods", "default_version-*.log"))
		if len(logs) > 0 {
			data, _ := os.ReadFile(logs[0])
			if podLog = string(data); strings.Contains(podLog, "exited (<nil>)") {
				break
			}
		}
	}
	if !strings.Contains(podLog, "exited (<nil>)") || !strings.Contains(podLog, "driftless") {
		t.Errorf("the pod runner did not run the driftless image's Pod to completion; its log:\n%s", podLog)
	}

	pids := readPIDs(t, dir)
	ports := listeningPorts(t, kubeconfig, pids)

	// status notices a component that died; down still stops the rest.
	if err := syscall.Kill(pids["kwok"], syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); running(pids["kwok"]) && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := run("status"); err == nil || !strings.HasPrefix(out, "degraded:") || !strings.Contains(out, "kwok") {
		t.Errorf("status after kwok died = %q, %v; want degraded naming kwok, with a non-zero exit", out, err)
	}

	out, err = run("down")
	if err != nil || !strings.Contains(out, "local cluster down") {
		t.Fatalf("down = %q, %v", out, err)
	}
	for _, name := range components {
		if name != "kwok" && !strings.Contains(out, name) {
			t.Errorf("down = %q; does not name %s as stopped", out, name)
		}
	}
	for name, pid := range pids {
		if running(pid) {
			t.Errorf("%s (pid %d) still running after down", name, pid)
		}
	}
	for _, port := range ports {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second); err == nil {
			c.Close()
			t.Errorf("port %s still listening after down", port)
		}
	}
	if out, err := run("status"); err == nil || out != "down" {
		t.Errorf("status after down = %q, %v; want down with a non-zero exit", out, err)
	}
	if out, err := checkNoLeftovers(dir); err != nil {
		t.Errorf("after down: %v\n%s", err, out)
	}
}

// TestInterruptedUpLeavesNothingBehind interrupts `up` (Ctrl-C) while it
// starts the cluster, and checks that it stops what it had started
// instead of leaving it running detached.
func TestInterruptedUpLeavesNothingBehind(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		testenv.MissingTool(t, "bash is not installed: hack/local-cluster.sh is not tested")
	}
	dir := t.TempDir()
	script, _ := filepath.Abs("../local-cluster.sh")
	down := exec.Command(script, "down")
	down.Env = append(os.Environ(), "DRIFTLESS_LOCAL_DIR="+dir)
	t.Cleanup(func() { _ = down.Run() })

	up := exec.Command(script, "up")
	up.Env = down.Env
	log, err := os.Create(filepath.Join(t.TempDir(), "up.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	up.Stdout, up.Stderr = log, log
	output := func() string { data, _ := os.ReadFile(log.Name()); return string(data) }
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()

	// Once kube-apiserver's pid file exists, etcd runs and the API server
	// is starting; up has seconds of work left.
	deadline := time.After(3 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver.pid")); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("up exited (%v) before it could be interrupted:\n%s", err, output())
		case <-deadline:
			t.Fatalf("kube-apiserver not started after 3 minutes:\n%s", output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if found, err := checkNoLeftovers(dir); err == nil || !strings.Contains(found, "/etcd ") {
		t.Fatalf("while up runs, found %q, want etcd", found)
	}

	if err := up.Process.Signal(os.Interrupt); err != nil { // up execs bin/localcluster: same pid
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(output(), "interrupted") {
			t.Errorf("interrupted up exited with %v, want a failure that says it was interrupted; output:\n%s", err, output())
		}
	case <-time.After(time.Minute):
		t.Fatalf("up still running a minute after SIGINT:\n%s", output())
	}
	if found, err := checkNoLeftovers(dir); err != nil {
		t.Errorf("after the interrupted up: %v\n%s", err, found)
	}
}

// checkNoLeftovers runs hack/check-no-leftovers.sh for processes whose
// command line names dir; it fails, with their list, when there are some.
func checkNoLeftovers(dir string) (string, error) {
	out, err := exec.Command("bash", "../check-no-leftovers.sh", dir).CombinedOutput()
	return string(out), err
}

// components are the processes `up` starts, each with a pid file.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "podrunner"}

func readPIDs(t *testing.T, dir string) map[string]int {
	pids := map[string]int{}
	for _, name := range components {
		data, err := os.ReadFile(filepath.Join(dir, name+".pid"))
		if err != nil {
			t.Fatalf("pid file of %s: %v", name, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			t.Fatalf("pid file of %s: %q", name, data)
		}
		if !running(pid) {
			t.Errorf("%s (pid %d) not running after up", name, pid)
		}
		pids[name] = pid
	}
	return pids
}

// listeningPorts returns the TCP ports the started processes listen on,
// checking that they include the API server's port and etcd's client port.
func listeningPorts(t *testing.T, kubeconfig string, pids map[string]int) []string {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(cfg.Host, "https://"))
	var etcdPort string
	args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids["etcd"]))
	for _, arg := range strings.Split(string(args), "\x00") {
		if port, ok := strings.CutPrefix(arg, "--listen-client-urls=http://127.0.0.1:"); ok {
			etcdPort = port
		}
	}
	listening := listeningTCPPorts(t)
	var ports []string
	for name, pid := range pids {
		for _, port := range socketPorts(pid, listening) {
			t.Logf("%s listens on %s", name, port)
			ports = append(ports, port)
		}
	}
	for _, want := range []string{apiPort, etcdPort} {
		if want == "" || !slices.Contains(ports, want) {
			t.Fatalf("API server port %q and etcd port %q not both among the listening ports %v", apiPort, etcdPort, ports)
		}
	}
	return ports
}

// listeningTCPPorts maps the inode of every listening TCP socket to its port.
func listeningTCPPorts(t *testing.T) map[string]string {
	ports := map[string]string{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			hexPort := f[1][strings.LastIndexByte(f[1], ':')+1:]
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				t.Fatalf("%s: %q: %v", table, line, err)
			}
			ports[f[9]] = strconv.FormatUint(port, 10)
		}
	}
	return ports
}

// socketPorts returns the listening ports among pid's open sockets.
func socketPorts(pid int, listening map[string]string) []string {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var ports []string
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			if port, ok := listening[strings.TrimSuffix(inode, "]")]; ok && !slices.Contains(ports, port) {
				ports = append(ports, port)
			}
		}
	}
	return ports
}

// running reports whether pid exists and is not a zombie awaiting its reaper.
func running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
