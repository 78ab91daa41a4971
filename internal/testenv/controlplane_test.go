package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

func TestControlPlaneServesServerSideApply(t *testing.T) {
	ctx := context.Background()
	const manager = "driftless-testenv"
	ns := env.Namespace(t) + "-ssa"

	_, err := env.Clientset.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace(ns).WithLabels(map[string]string{"team": "web"}),
		metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		t.Fatalf("apply namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })

	labels := map[string]string{"app": "web"}
	deploy := appsv1ac.Deployment("web", ns).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(0).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").WithImage("nginx:1.27")))))
	if _, err := env.Clientset.AppsV1().Deployments(ns).Apply(ctx, deploy,
		metav1.ApplyOptions{FieldManager: manager, Force: true}); err != nil {
		t.Fatalf("apply deployment: %v", err)
	}

	var got appsv1.Deployment
	if err := env.Client.Get(ctx, keyOf(ns, "web"), &got); err != nil {
		t.Fatalf("read back deployment: %v", err)
	}
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
		t.Errorf("image = %q, want nginx:1.27", img)
	}
	entry := findManager(got.ManagedFields, manager)
	if entry == nil {
		t.Fatalf("field manager %q not in managedFields: %v", manager, managers(got.ManagedFields))
	}
	if entry.Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("operation = %s, want Apply", entry.Operation)
	}
	var fields map[string]any
	if err := json.Unmarshal(entry.FieldsV1.GetRawBytes(), &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["f:spec"]; !ok {
		t.Errorf("manager %q does not own spec fields: %s", manager, entry.FieldsV1.GetRawBytes())
	}

	gotNS, err := env.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read back namespace: %v", err)
	}
	if findManager(gotNS.ManagedFields, manager) == nil {
		t.Errorf("field manager %q not in namespace managedFields: %v", manager, managers(gotNS.ManagedFields))
	}
}

func TestControlPlaneReportsPinnedVersion(t *testing.T) {
	v, err := env.Clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor != "37" {
		t.Errorf("server version = %s (major %q minor %q), want v1.37.x: the control plane was built without version ldflags",
			v.GitVersion, v.Major, v.Minor)
	}
}

// The plain control plane that most test packages use stays etcd and
// kube-apiserver only; workloads are opt-in.
func TestDefaultControlPlaneRunsNoWorkloads(t *testing.T) {
	if env.ControlPlane.Workloads {
		t.Fatal("Main started a control plane with workloads")
	}
	for _, name := range []string{controllerManagerName, schedulerName, kwokName} {
		if _, err := os.Stat(env.ControlPlane.pidFile(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s pid file: %v; want none", name, err)
		}
	}
	nodes, err := env.Clientset.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("%d nodes, want none", len(nodes.Items))
	}
	if err := env.waitForServiceAccount(context.Background(), "default"); err == nil {
		t.Error("waitForServiceAccount without workloads succeeded; want an error saying workloads are needed")
	}
}
