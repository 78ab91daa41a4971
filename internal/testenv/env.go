package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Env is a running control plane with ready-made clients.
type Env struct {
	ControlPlane *ControlPlane
	Config       *rest.Config
	Client       client.Client
	Clientset    kubernetes.Interface
	// PodRunner runs the opted-in Pods of the simulated node, with
	// Options.RunDriftlessPods; nil otherwise.
	PodRunner *PodRunner

	stopPods func()
}

// Options choose what a test package's control plane runs. The zero value
// is etcd and kube-apiserver only, which is all most tests need.
type Options struct {
	// Workloads also runs kube-controller-manager, kube-scheduler and one
	// simulated node, so that Deployments get Pods that become Ready; see
	// ControlPlane.Workloads. It adds a second or two to start-up and some
	// CPU while the tests run.
	Workloads bool
	// Audit logs every write request to the API server, so that a test
	// can tell what a process wrote (Env.AuditMark, Env.AuditWrites).
	Audit bool
	// Profiling serves the control plane's pprof endpoints; see
	// ControlPlane.Profiling.
	Profiling bool
	// RunDriftlessPods (with Workloads) builds cmd/driftless and starts a
	// PodRunner that runs it for every Pod of the simulated node whose
	// container image is DriftlessImage, as its ServiceAccount: the agent
	// Deployment `driftless install` creates then really runs.
	RunDriftlessPods bool
	// NoPriorityAndFairness turns the API server's API Priority and
	// Fairness off; see ControlPlane.NoPriorityAndFairness.
	NoPriorityAndFairness bool
}

// Start launches a control plane (etcd and kube-apiserver) in a fresh
// temporary directory.
func Start(ctx context.Context) (*Env, error) { return StartWith(ctx, Options{}) }

// StartWith is Start with options.
func StartWith(ctx context.Context, opts Options) (*Env, error) {
	dir, err := os.MkdirTemp("", "driftless-controlplane-")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, BinDir: DefaultBinDir(), Workloads: opts.Workloads, Audit: opts.Audit, Profiling: opts.Profiling,
		NoPriorityAndFairness: opts.NoPriorityAndFairness}
	if err := cp.Start(ctx); err != nil {
		return nil, fmt.Errorf("%w (logs kept in %s)", err, dir)
	}
	cfg, err := cp.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("%w (stop: %v)", err, cp.Stop())
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w (stop: %v)", err, cp.Stop())
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w (stop: %v)", err, cp.Stop())
	}
	e := &Env{ControlPlane: cp, Config: cfg, Client: c, Clientset: cs}
	if opts.RunDriftlessPods {
		if err := e.startPodRunner(); err != nil {
			return nil, fmt.Errorf("%w (stop: %v)", err, cp.Stop())
		}
	}
	return e, nil
}

// startPodRunner builds the driftless binary into the control plane's
// directory and runs the PodRunner until Stop.
func (e *Env) startPodRunner() error {
	if !e.ControlPlane.Workloads {
		return errors.New("RunDriftlessPods needs Workloads: Pods need a node")
	}
	bin, err := BuildDriftless(filepath.Join(e.ControlPlane.Dir, "bin"))
	if err != nil {
		return err
	}
	e.PodRunner = &PodRunner{Config: e.Config, Images: map[string]string{DriftlessImage: bin}, Dir: filepath.Join(e.ControlPlane.Dir, "pods")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.PodRunner.Run(ctx) }()
	e.stopPods = func() { cancel(); <-done }
	return nil
}

// Stop stops the control plane and removes its directory.
func (e *Env) Stop() error {
	if e.stopPods != nil {
		e.stopPods()
	}
	err := e.ControlPlane.Stop()
	if err == nil {
		err = os.RemoveAll(e.ControlPlane.Dir)
	}
	return err
}

// Main is a TestMain body: it starts a control plane into *env, runs the
// package's tests and stops it. A control plane that fails to start fails
// the whole package with the reason.
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
func Main(m *testing.M, env **Env) { MainWith(m, env, nil) }

// MainWith is Main with a setup step, such as installing CRDs, run once
// the control plane is up and before the tests.
func MainWith(m *testing.M, env **Env, setup func(*Env) error) {
	MainWithOptions(m, env, Options{}, setup)
}

// MainWithWorkloads is MainWith for a package whose tests need Pods: the
// control plane also runs kube-controller-manager, kube-scheduler and a
// simulated node (Options.Workloads). setup may be nil.
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { testenv.MainWithWorkloads(m, &env, nil) }
func MainWithWorkloads(m *testing.M, env **Env, setup func(*Env) error) {
	MainWithOptions(m, env, Options{Workloads: true}, setup)
}

// MainWithOptions is MainWith with options.
func MainWithOptions(m *testing.M, env **Env, opts Options, setup func(*Env) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e, err := StartWith(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: control plane did not start: %v\n", err)
		os.Exit(1)
	}
	if setup != nil {
		if err := setup(e); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: setup: %v\n", err)
			_ = e.Stop()
			os.Exit(1)
		}
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop control plane: %v\n", err)
	}
	os.Exit(code)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test and deletes it
// when the test ends. With workloads, it also waits for the namespace's
// default ServiceAccount, without which Pods are rejected.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	name := fmt.Sprintf("%s-%04x", base, rand.IntN(0x10000))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	if e.ControlPlane.Workloads {
		e.WaitForServiceAccount(t, name)
	}
	return name
}

// UserKubeconfig writes a kubeconfig for user in groups (a client
// certificate signed by the control plane's CA) and returns its path:
// for a process, such as an agent, whose requests a test tells apart in
// the audit log. Group system:masters may do anything.
func (e *Env) UserKubeconfig(user string, groups ...string) (string, error) {
	cp := e.ControlPlane
	certPEM, keyPEM, err := pki{dir: filepath.Join(cp.Dir, "pki")}.clientCert(user, groups)
	if err != nil {
		return "", fmt.Errorf("client certificate for %s: %w", user, err)
	}
	caPEM, err := os.ReadFile(filepath.Join(cp.Dir, "pki", "ca.crt"))
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["driftless-local"] = &clientcmdapi.Cluster{Server: cp.APIServerURL, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["driftless-local"] = &clientcmdapi.Context{Cluster: "driftless-local", AuthInfo: user}
	cfg.CurrentContext = "driftless-local"
	path := filepath.Join(cp.Dir, "kubeconfig-"+unsafeName.ReplaceAllString(user, "-"))
	return path, clientcmd.WriteToFile(*cfg, path)
}
