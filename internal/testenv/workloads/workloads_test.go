package workloads

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/driftless/driftless/internal/testenv"
)

// deadline bounds every wait. The components react within a few seconds;
// the margin is for a loaded CI machine.
const deadline = 60 * time.Second

func TestSimulatedNodeIsReady(t *testing.T) {
	node, err := env.Clientset.CoreV1().Nodes().Get(context.Background(), testenv.SimulatedNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Labels[testenv.SimulatedNodeLabel]; got != testenv.SimulatedNodeLabelValue {
		t.Errorf("label %s = %q, want %q", testenv.SimulatedNodeLabel, got, testenv.SimulatedNodeLabelValue)
	}
	if !nodeReady(node) {
		t.Errorf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
	}
	for name, want := range map[corev1.ResourceName]string{"cpu": "32", "memory": "256Gi", "pods": "110"} {
		if got := node.Status.Allocatable[name]; got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), want)
		}
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("node has taints %v; Pods without tolerations could not run on it", node.Spec.Taints)
	}
}

func TestDeploymentBecomesAvailable(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	d := deployment(ns, "web", 2, nil)
	if _, err := env.Clientset.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	poll(t, "Deployment web 2/2 available", func() (bool, string) {
		got, err := env.Clientset.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := got.Status
		return s.ObservedGeneration >= got.Generation && s.UpdatedReplicas == 2 && s.ReadyReplicas == 2 &&
				s.AvailableReplicas == 2 && deploymentCondition(got, appsv1.DeploymentAvailable) == corev1.ConditionTrue,
			fmt.Sprintf("status %+v", s)
	})

	pods := podsOf(t, ns, "web")
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	for _, p := range pods {
		if p.Spec.NodeName != testenv.SimulatedNodeName || p.Status.Phase != corev1.PodRunning || !podReady(&p) || p.Status.PodIP == "" {
			t.Errorf("pod %s: node %q phase %s ready %v IP %q; want Running and Ready with an IP on %s",
				p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p), p.Status.PodIP, testenv.SimulatedNodeName)
		}
	}
}

func TestNeverReadyPodsKeepDeploymentUnavailable(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	d := deployment(ns, "stuck", 2, map[string]string{testenv.NeverReadyAnnotation: "true"})
	if _, err := env.Clientset.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The Pods are created, scheduled and started...
	poll(t, "2 Pods Running", func() (bool, string) {
		pods := podsOf(t, ns, "stuck")
		running := 0
		for _, p := range pods {
			if p.Spec.NodeName == testenv.SimulatedNodeName && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return len(pods) == 2 && running == 2, fmt.Sprintf("%d pods, %d running", len(pods), running)
	})
	// ...and stay not ready, so the Deployment stays unavailable. Watch it
	// for a while: kwok acts within milliseconds of the change it reacts to.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		for _, p := range podsOf(t, ns, "stuck") {
			if podReady(&p) {
				t.Fatalf("pod %s became Ready: %+v", p.Name, p.Status.Conditions)
			}
			if p.Status.Phase != corev1.PodRunning {
				t.Fatalf("pod %s is %s, want Running", p.Name, p.Status.Phase)
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.Ready || c.State.Running == nil || !ptr.Deref(c.Started, false) {
					t.Errorf("pod %s container %s: ready %v started %v running %v; want started, running and not ready",
						p.Name, c.Name, c.Ready, ptr.Deref(c.Started, false), c.State.Running != nil)
				}
			}
		}
		got, err := env.Clientset.AppsV1().Deployments(ns).Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.AvailableReplicas != 0 || got.Status.ReadyReplicas != 0 {
			t.Fatalf("deployment status %+v, want no ready or available replicas", got.Status)
		}
		if c := deploymentCondition(got, appsv1.DeploymentAvailable); c == corev1.ConditionTrue {
			t.Fatalf("deployment is Available: %+v", got.Status.Conditions)
		}
	}
}

func TestPodInFreshNamespaceIsAccepted(t *testing.T) {
	ctx := context.Background()
	// Namespace waits for the default ServiceAccount; without it the API
	// server would reject the Pod.
	ns := env.Namespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
	}
	if _, err := env.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod right after Namespace: %v", err)
	}
	poll(t, "Pod Ready", func() (bool, string) {
		got, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, "solo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podReady(got), fmt.Sprintf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
	})

	// A namespace made some other way is ready for Pods once
	// WaitForServiceAccount returns.
	other := ns + "-x"
	if _, err := env.Clientset.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Clientset.CoreV1().Namespaces().Delete(ctx, other, metav1.DeleteOptions{}) })
	env.WaitForServiceAccount(t, other)
	pod.Namespace = other
	if _, err := env.Clientset.CoreV1().Pods(other).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod after WaitForServiceAccount: %v", err)
	}
}

func deployment(ns, name string, replicas int32, podAnnotations map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: "registry.invalid/app:1", // never pulled: kwok runs no containers
				}}},
			},
		},
	}
}

func podsOf(t *testing.T, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := env.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// poll calls done until it reports true, failing the test with its last
// description when deadline passes.
func poll(t *testing.T, what string, done func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, deadline, what, func() string {
		if ok, last := done(); !ok {
			return "not yet: " + last
		}
		return ""
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) corev1.ConditionStatus {
	for _, c := range d.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
