package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A Pod of an image the runner knows runs as a local process with the
// Pod's ServiceAccount identity, its env and a TMPDIR of its own, logs to
// its file, and stops when the Pod is deleted.
func TestPodRunnerRunsAnOptedInPodAsItsServiceAccount(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe.sh")
	kubectl := filepath.Join(env.ControlPlane.BinDir, "kubectl")
	script := "#!/bin/sh\n" +
		"echo \"user=$(" + kubectl + " auth whoami -o jsonpath='{.status.userInfo.username}')\"\n" +
		"echo \"args=$* namespace=$POD_NAMESPACE greeting=$GREETING tmpdir=$TMPDIR\"\n" +
		"exec sleep 300\n"
	if err := os.WriteFile(probe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runner := &PodRunner{Config: env.Config, Images: map[string]string{"example.test/probe": probe}, Dir: filepath.Join(dir, "pods")}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runner.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner"}}
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: corev1.PodSpec{
			NodeName:                      SimulatedNodeName, // no scheduler here: bound at once
			ServiceAccountName:            sa.Name,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:  "probe",
				Image: "example.test/probe:1.0",
				Args:  []string{"one", "two"},
				Env: []corev1.EnvVar{
					{Name: "GREETING", Value: "hello"},
					{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	// Another Pod of an image the runner does not know: nothing runs.
	other := pod.DeepCopy()
	other.Name, other.Spec.Containers[0].Image = "other", "example.test/other:1.0"
	for _, obj := range []client.Object{sa, pod, other} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range []*corev1.Pod{pod, other} {
			_ = env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0))
		}
	})

	logPath := filepath.Join(runner.Dir, ns+"_probe_"+string(pod.UID)+".log")
	var log string
	poll(t, 30*time.Second, "the probe's output in its log", func() bool {
		data, _ := os.ReadFile(logPath)
		log = string(data)
		return strings.Contains(log, "args=")
	})
	for _, want := range []string{
		"user=system:serviceaccount:" + ns + ":runner\n",
		"args=one two namespace=" + ns + " greeting=hello tmpdir=" + filepath.Join(runner.Dir, ns+"_probe_"+string(pod.UID), "tmp") + "\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the probe printed\n%s\nwant a line %q", log, want)
		}
	}
	running := runner.Processes()
	pid := running[ns+"/probe"]
	if pid == 0 || len(running) != 1 {
		t.Fatalf("processes = %v, want one, for %s/probe", running, ns)
	}

	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the process stops once its Pod is deleted", func() bool {
		return len(runner.Processes()) == 0 && syscall.Kill(pid, 0) != nil
	})
}

func TestImageRepository(t *testing.T) {
	tests := []struct{ name, image, want string }{
		{name: "a tag is dropped", image: "ghcr.io/driftless/driftless:latest", want: "ghcr.io/driftless/driftless"},
		{name: "a registry port is kept", image: "localhost:5000/driftless:1.2", want: "localhost:5000/driftless"},
		{name: "a digest is dropped", image: "ghcr.io/driftless/driftless@sha256:0123", want: "ghcr.io/driftless/driftless"},
		{name: "an untagged image stays", image: "localhost:5000/driftless", want: "localhost:5000/driftless"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := imageRepository(tt.image); got != tt.want {
				t.Errorf("imageRepository(%q) = %q, want %q", tt.image, got, tt.want)
			}
		})
	}
}

func poll(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() string {
		if ok() {
			return ""
		}
		return "not yet"
	})
}
