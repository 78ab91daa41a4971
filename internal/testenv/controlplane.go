package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ControlPlane is a real etcd and kube-apiserver on loopback ports, built
// from Go modules by hack/controlplane, optionally with the parts that run
// workloads. Tests start one per package; the hack/local-cluster.sh script
// starts a detached one, with workloads, for the demo.
type ControlPlane struct {
	// Dir holds the data, certificates, logs, pid files and kubeconfig.
	Dir string
	// BinDir holds the binaries (and kwok's stages), as built into bin/k8s.
	BinDir string
	// Detach leaves the processes running when the starting process
	// exits (for hack/local-cluster.sh); otherwise they die with it.
	Detach bool
	// Workloads also starts kube-controller-manager, kube-scheduler and
	// kwok, and registers one simulated node (SimulatedNodeName, with 32
	// CPUs, 256Gi of memory and room for 110 Pods). Deployments then get
	// Pods, which are scheduled to that node and become Running and Ready
	// at once (or never Ready, see NeverReadyAnnotation). No container
	// runs: kwok only writes the Pods' status.
	Workloads bool
	// Audit makes the API server log every write request (create,
	// update, patch, delete) at level Metadata, as JSON lines, to
	// AuditLogPath; see Env.AuditWrites.
	Audit bool
	// Profiling serves Go's pprof endpoints: kube-apiserver's under
	// /debug/pprof to an admin client, etcd's under EtcdURL/debug/pprof.
	// The bench profiles the control plane with them (-apiserver-profile).
	Profiling bool
	// NoPriorityAndFairness turns the API server's API Priority and
	// Fairness off (--enable-priority-and-fairness=false), as on an API
	// server older than 1.20 or one whose operator turned it off.
	NoPriorityAndFairness bool

	// APIServerURL and EtcdURL are set by Start.
	APIServerURL, EtcdURL string

	procs []*exec.Cmd
	// args are the arguments each component was started with, by name,
	// so that StopComponent and StartComponent can restart it as it was.
	args map[string][]string
}

// Component names, also the names of their binaries, logs and pid files.
const (
	etcdName      = "etcd"
	apiserverName = "kube-apiserver"
)

// KubeconfigPath is the admin kubeconfig written by Start.
func (cp *ControlPlane) KubeconfigPath() string { return filepath.Join(cp.Dir, "kubeconfig") }

// Start launches etcd and kube-apiserver on free loopback ports and waits
// until the API server is ready; with Workloads, it then starts the
// workload components and waits until the simulated node is Ready and the
// controller-manager works. On failure it stops whatever it started and
// returns an error that includes the end of the failing component's log.
func (cp *ControlPlane) Start(ctx context.Context) error {
	if err := cp.checkBinaries(); err != nil {
		return err
	}
	certs := pki{dir: filepath.Join(cp.Dir, "pki")}
	if err := certs.ensure(); err != nil {
		return fmt.Errorf("control plane certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	cp.args = map[string][]string{}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cp.EtcdURL = etcdURL
	if err := cp.launch(etcdName, nil,
		"--enable-pprof="+strconv.FormatBool(cp.Profiling),
		"--name=driftless",
		"--data-dir="+filepath.Join(cp.Dir, "etcd-data"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=driftless="+peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	); err != nil {
		return errors.Join(err, cp.Stop())
	}
	if err := cp.waitReady(ctx, etcdName, http.DefaultClient, etcdURL+"/health"); err != nil {
		return errors.Join(err, cp.Stop())
	}

	cp.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	var auditArgs []string
	if cp.Audit {
		if err := os.WriteFile(cp.auditPolicyPath(), []byte(auditPolicy), 0o600); err != nil {
			return errors.Join(err, cp.Stop())
		}
		auditArgs = []string{
			"--audit-policy-file=" + cp.auditPolicyPath(),
			"--audit-log-path=" + cp.AuditLogPath(),
			"--audit-log-format=json",
			"--audit-log-mode=blocking",
		}
	}
	if err := cp.launch(apiserverName, nil, append(auditArgs,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // loopback may not be advertised as an endpoint
		"--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+filepath.Join(cp.Dir, "apiserver-certs"),
		"--tls-cert-file="+certs.path("apiserver.crt"),
		"--tls-private-key-file="+certs.path("apiserver.key"),
		"--client-ca-file="+certs.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+certs.path("sa.pub"),
		"--service-account-signing-key-file="+certs.path("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--profiling="+strconv.FormatBool(cp.Profiling),
		"--enable-priority-and-fairness="+strconv.FormatBool(!cp.NoPriorityAndFairness),
		"--v=0",
	)...); err != nil {
		return errors.Join(err, cp.Stop())
	}
	if err := cp.writeKubeconfig(certs); err != nil {
		return errors.Join(err, cp.Stop())
	}
	client, err := cp.adminHTTPClient(certs)
	if err != nil {
		return errors.Join(err, cp.Stop())
	}
	if err := cp.waitReady(ctx, apiserverName, client, cp.APIServerURL+"/readyz"); err != nil {
		return errors.Join(err, cp.Stop())
	}
	if cp.Workloads {
		if err := cp.startWorkloads(ctx, certs); err != nil {
			return errors.Join(err, cp.Stop())
		}
	}
	return nil
}

// RESTConfig returns an admin client configuration for the control plane.
func (cp *ControlPlane) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Stop terminates the processes this ControlPlane started, newest first,
// and waits for them to exit.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for i := len(cp.procs) - 1; i >= 0; i-- {
		errs = append(errs, stopPID(cp.procs[i].Process.Pid, 20*time.Second))
		_ = cp.procs[i].Wait()
	}
	cp.procs = nil
	return errors.Join(errs...)
}

func (cp *ControlPlane) checkBinaries() error {
	for _, name := range cp.binaries() {
		if _, err := os.Stat(filepath.Join(cp.BinDir, name)); err != nil {
			return fmt.Errorf("control plane binary %s not found in %s: run `make controlplane` (or `make test`, which builds it)", name, cp.BinDir)
		}
	}
	return nil
}

// launch starts a component with args, and env added to the environment.
func (cp *ControlPlane) launch(name string, env []string, args ...string) error {
	logFile, err := os.OpenFile(filepath.Join(cp.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(cp.BinDir, name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// A group of its own: Stop signals the group, and a Ctrl-C meant for
	// the starting process does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := StartTied // dies with the starting process, even on a panic or SIGKILL
	if cp.Detach {
		start = (*exec.Cmd).Start
	}
	if err := start(cmd); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	cp.procs = append(cp.procs, cmd)
	if cp.args == nil {
		cp.args = map[string][]string{}
	}
	cp.args[name] = args
	return os.WriteFile(cp.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
}

func (cp *ControlPlane) pidFile(name string) string { return filepath.Join(cp.Dir, name+".pid") }

func (cp *ControlPlane) waitReady(ctx context.Context, name string, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	proc := cp.procs[len(cp.procs)-1]
	for {
		if !processAlive(proc.Process.Pid) {
			return fmt.Errorf("%s exited during start-up; last log lines:\n%s", name, cp.logTail(name))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w; last log lines:\n%s", name, url, ctx.Err(), cp.logTail(name))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) logTail(name string) string {
	data, _ := os.ReadFile(filepath.Join(cp.Dir, name+".log"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func (cp *ControlPlane) writeKubeconfig(certs pki) error {
	read := func(name string) []byte { b, _ := os.ReadFile(certs.path(name)); return b }
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["driftless-local"] = &clientcmdapi.Cluster{Server: cp.APIServerURL, CertificateAuthorityData: read("ca.crt")}
	cfg.AuthInfos["driftless-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: read("admin.crt"), ClientKeyData: read("admin.key")}
	cfg.Contexts["driftless-local"] = &clientcmdapi.Context{Cluster: "driftless-local", AuthInfo: "driftless-admin"}
	cfg.CurrentContext = "driftless-local"
	return clientcmd.WriteToFile(*cfg, cp.KubeconfigPath())
}

func (cp *ControlPlane) adminHTTPClient(certs pki) (*http.Client, error) {
	pair, err := tls.LoadX509KeyPair(certs.path("admin.crt"), certs.path("admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(certs.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}},
	}, nil
}

// freePorts reserves n distinct free loopback ports by listening on them
// at once, then releases them for the components to bind.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func processAlive(pid int) bool {
	// A zombie still accepts signal 0; read its state to tell.
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// stopPID sends SIGTERM to the process group led by pid, then SIGKILL when
// it has not exited within grace.
func stopPID(pid int, grace time.Duration) error {
	if !processAlive(pid) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for range 100 {
		if !processAlive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("process %d did not exit after SIGKILL", pid)
}
