package testenv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NeverReadyAnnotation, set to "true" on a Pod (for a Deployment: on its
// pod template), makes the simulated node run the Pod without it ever
// becoming ready: it is Running with its containers started, and its Ready
// and ContainersReady conditions stay False, as if a readiness probe kept
// failing. Use it to test rollouts that never become available.
const NeverReadyAnnotation = "driftless.dev/test-never-ready"

// Simulated node of a control plane with Workloads.
const (
	// SimulatedNodeName is the name of the one node.
	SimulatedNodeName = "kwok-node-0"
	// SimulatedNodeLabel and SimulatedNodeLabelValue label that node.
	SimulatedNodeLabel      = "type"
	SimulatedNodeLabelValue = "kwok"
)

// Workload component names, also the names of their binaries, logs and pid
// files.
const (
	controllerManagerName = "kube-controller-manager"
	schedulerName         = "kube-scheduler"
	kwokName              = "kwok"
)

// kwokStagesDir is where hack/controlplane/build.sh puts kwok's default
// Stage files, under the binary directory.
const kwokStagesDir = "kwok-stages"

// kwokNodeAnnotation marks the nodes that kwok manages.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

//go:embed kwok-pod-never-ready.yaml
var neverReadyStage []byte

// components lists every component in start order; Stop and StopDetached
// go in reverse.
var components = []string{etcdName, apiserverName, controllerManagerName, schedulerName, kwokName}

func (cp *ControlPlane) binaries() []string {
	if cp.Workloads {
		return components
	}
	return []string{etcdName, apiserverName}
}

// startWorkloads starts kube-controller-manager, kube-scheduler and kwok
// against the running API server, registers the simulated node and waits
// until the node is Ready and the controllers work.
func (cp *ControlPlane) startWorkloads(ctx context.Context, certs pki) error {
	started := time.Now()
	if err := cp.launch(controllerManagerName, nil,
		"--kubeconfig="+cp.KubeconfigPath(),
		"--controllers=*",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+certs.path("sa.key"),
		"--root-ca-file="+certs.path("ca.crt"),
		"--cluster-signing-cert-file="+certs.path("ca.crt"),
		"--cluster-signing-key-file="+certs.path("ca.key"),
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--v=0",
	); err != nil {
		return err
	}

	schedulerConfig := filepath.Join(cp.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 100
  burst: 200
leaderElection:
  leaderElect: false
`, cp.KubeconfigPath())), 0o600); err != nil {
		return err
	}
	if err := cp.launch(schedulerName, nil,
		"--config="+schedulerConfig,
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--v=0",
	); err != nil {
		return err
	}

	stages, err := cp.writeKwokStages()
	if err != nil {
		return err
	}
	if err := cp.launch(kwokName, []string{"KWOK_WORKDIR=" + filepath.Join(cp.Dir, "kwok")},
		"--kubeconfig="+cp.KubeconfigPath(),
		"--config="+stages,
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
		"--cidr=10.244.0.0/16",
		"--node-lease-duration-seconds=40", // as a kubelet: kwok renews the node's Lease every 10s
	); err != nil {
		return err
	}

	cfg, err := cp.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := createSimulatedNode(ctx, cs); err != nil {
		return err
	}
	return cp.waitWorkloads(ctx, cs, started)
}

// writeKwokStages writes kwok's default stages from the binary directory
// and driftless's own stages into one file in Dir and returns its path.
func (cp *ControlPlane) writeKwokStages() (string, error) {
	files, err := filepath.Glob(filepath.Join(cp.BinDir, kwokStagesDir, "*.yaml"))
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no kwok stages in %s: run `make controlplane`", filepath.Join(cp.BinDir, kwokStagesDir))
	}
	slices.Sort(files)
	var docs []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		docs = append(docs, strings.TrimSpace(string(data)))
	}
	docs = append(docs, strings.TrimSpace(string(neverReadyStage)))
	path := filepath.Join(cp.Dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600)
}

// createSimulatedNode registers the node kwok simulates. A node left from
// an earlier run of a detached control plane (same etcd data) is kept.
func createSimulatedNode(ctx context.Context, cs kubernetes.Interface) error {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        SimulatedNodeName,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				SimulatedNodeLabel:       SimulatedNodeLabelValue,
				"kubernetes.io/hostname": SimulatedNodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources},
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create simulated node: %w", err)
	}
	return nil
}

// waitWorkloads waits until kwok has made the node Ready and renewed its
// lease since started, the controller-manager has lifted the node's
// not-ready taint and created the default ServiceAccount, while checking
// that every workload component still runs.
func (cp *ControlPlane) waitWorkloads(ctx context.Context, cs kubernetes.Interface, started time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var waitingFor string
	for {
		for _, name := range []string{controllerManagerName, schedulerName, kwokName} {
			if pid, ok := readPID(cp.pidFile(name)); !ok || !processAlive(pid) {
				return fmt.Errorf("%s exited during start-up; last log lines:\n%s", name, cp.logTail(name))
			}
		}
		waitingFor = workloadsPending(ctx, cs, started)
		if waitingFor == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workloads not ready: %s: %w; last kwok log lines:\n%s\nlast kube-controller-manager log lines:\n%s",
				waitingFor, ctx.Err(), cp.logTail(kwokName), cp.logTail(controllerManagerName))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// workloadsPending returns what the workload components have not done yet,
// or "" when they are ready.
func workloadsPending(ctx context.Context, cs kubernetes.Interface, started time.Time) string {
	node, err := cs.CoreV1().Nodes().Get(ctx, SimulatedNodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("node %s: %v", SimulatedNodeName, err)
	}
	if !nodeReady(node) {
		return fmt.Sprintf("node %s is not Ready", SimulatedNodeName)
	}
	// The API server taints a new node not-ready; the controller-manager
	// lifts the taint once it sees the node Ready. Until then nothing would
	// be scheduled there.
	if len(node.Spec.Taints) > 0 {
		return fmt.Sprintf("node %s has taints %v", SimulatedNodeName, node.Spec.Taints)
	}
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, SimulatedNodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("lease of node %s: %v", SimulatedNodeName, err)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Add(time.Second).Before(started) {
		return fmt.Sprintf("lease of node %s not renewed by kwok", SimulatedNodeName)
	}
	if _, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Sprintf("ServiceAccount default/default (created by kube-controller-manager): %v", err)
	}
	return ""
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitForServiceAccount waits until the controller-manager has created the
// default ServiceAccount in namespace ns; the API server rejects Pods in a
// namespace until then. Namespace already waits; call this for namespaces
// created otherwise. It needs a control plane with workloads.
func (e *Env) WaitForServiceAccount(t testing.TB, ns string) {
	t.Helper()
	if err := e.waitForServiceAccount(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

func (e *Env) waitForServiceAccount(ctx context.Context, ns string) error {
	if !e.ControlPlane.Workloads {
		return errors.New("WaitForServiceAccount: the control plane runs no controller-manager; start it with workloads (testenv.MainWithWorkloads)")
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		_, err := e.Clientset.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ServiceAccount %s/default not created: %w (last error: %v)", ns, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
