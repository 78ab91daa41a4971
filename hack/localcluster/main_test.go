package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// TestUpThenDownLeavesNothingBehind drives hack/local-cluster.sh the way a
// developer does and checks that down stops every process up started and
// frees every port.
func TestUpThenDownLeavesNothingBehind(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not available")
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

	pids := readPIDs(t, dir)
	ports := listeningPorts(t, kubeconfig, dir)

	if out, err := run("down"); err != nil || !strings.Contains(out, "local cluster down") {
		t.Fatalf("down = %q, %v", out, err)
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
}

func readPIDs(t *testing.T, dir string) map[string]int {
	pids := map[string]int{}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		data, err := os.ReadFile(filepath.Join(dir, name+".pid"))
		if err != nil {
			t.Fatalf("pid file of %s: %v", name, err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		pids[name] = pid
	}
	return pids
}

// listeningPorts returns the API server's port and etcd's client port.
func listeningPorts(t *testing.T, kubeconfig, dir string) []string {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(cfg.Host, "https://"))
	ports := []string{apiPort}
	cmdline, _ := os.ReadFile(filepath.Join(dir, "etcd.pid"))
	pid := strings.TrimSpace(string(cmdline))
	args, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	for _, arg := range strings.Split(string(args), "\x00") {
		if url, ok := strings.CutPrefix(arg, "--listen-client-urls=http://127.0.0.1:"); ok {
			ports = append(ports, url)
		}
	}
	if len(ports) != 2 {
		t.Fatalf("could not read both ports: %v", ports)
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
