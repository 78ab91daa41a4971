// Package installtest runs `driftless install` against a control plane
// that runs Pods (a simulated node), so that the agent's Deployment
// becomes available, which the control plane of package cli cannot do;
// a pod runner (testenv.PodRunner) runs the agent of that Deployment as a
// local process, as its ServiceAccount.
package installtest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/cli"
	"github.com/driftless/driftless/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.MainWithOptions(m, &env, testenv.Options{Workloads: true, RunDriftlessPods: true}, nil)
}

// install waits until the agent's Deployment is available, saying so,
// and only then prints the public key to add as a deploy key.
func TestInstallWaitsForTheAgentDeploymentToBeAvailable(t *testing.T) {
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	var out, errOut bytes.Buffer
	code := cli.Execute([]string{"install", "--kubeconfig", env.ControlPlane.KubeconfigPath(), "--namespace", ns,
		"--git-url", repo.SSHURL(), "--git-branch", "main", "--git-path", "clusters/local,apps", "--sync-interval", "1m", "--timeout", "2m"}, &out, &errOut)
	t.Logf("stderr:\n%s\nstdout:\n%s", errOut.String(), out.String())
	if code != 0 {
		t.Fatalf("install exited %d", code)
	}
	for _, want := range []string{"waiting up to 2m0s for Deployment " + ns + "/driftless to be available", "Deployment " + ns + "/driftless is available"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("install does not say %q", want)
		}
	}
	if !strings.Contains(out.String(), "read-only deploy key:\n\nssh-ed25519 ") {
		t.Errorf("install does not print the public key:\n%s", out.String())
	}
	scheme := testenv.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "driftless"}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 1 {
		t.Errorf("available replicas = %d, want 1", d.Status.AvailableReplicas)
	}
}

// On a cluster where the agent runs, every check passes.
func TestCheckPassesOnAnInstalledAndAvailableAgent(t *testing.T) {
	ns := env.Namespace(t)
	kubeconfig := env.ControlPlane.KubeconfigPath()
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	var out, errOut bytes.Buffer
	if code := cli.Execute([]string{"install", "--kubeconfig", kubeconfig, "--namespace", ns, "--git-url", repo.HTTPURL(), "--timeout", "2m"}, &out, &errOut); code != 0 {
		t.Fatalf("install exited %d: %s", code, errOut.String())
	}
	out.Reset()
	code := cli.Execute([]string{"check", "--kubeconfig", kubeconfig, "--namespace", ns}, &out, &errOut)
	t.Logf("check:\n%s", out.String())
	if code != 0 || strings.Contains(out.String(), "FAIL") {
		t.Errorf("check exited %d:\n%s", code, out.String())
	}
}

// uninstall removes the agent, its shards (install --shards) and the
// state it kept, and leaves the Syncs and their objects; --crds asks
// first, then removes the CRD and the Syncs, orphaning their objects.
func TestUninstallRemovesTheAgentAndWithCRDsTheSyncsButNeverTheirObjects(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfig := env.ControlPlane.KubeconfigPath()
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		root := cli.NewRootCommand(&out, &errOut)
		root.SetIn(strings.NewReader(stdin))
		root.SetArgs(append(args, "--kubeconfig", kubeconfig, "--namespace", ns))
		code := 0
		if err := root.Execute(); err != nil {
			code = 1
			errOut.WriteString("Error: " + err.Error())
		}
		return code, out.String(), errOut.String()
	}
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	if code, _, errOut := run("", "install", "--git-url", repo.HTTPURL(), "--shards", "2", "--timeout", "2m"); code != 0 {
		t.Fatalf("install failed: %s", errOut)
	}
	scheme := testenv.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	sync := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps", Finalizers: []string{v1alpha1.Finalizer}},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.HTTPURL(), Branch: "main"}}, Suspend: true}}
	managed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "managed", Labels: map[string]string{v1alpha1.SyncLabel: v1alpha1.SyncLabelValue(ns, "apps")}}}
	// What a sharded agent keeps: the push notices it passed on.
	notices := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.RelayConfigMap}, Data: map[string]string{"notices": "[]"}}
	for _, obj := range []client.Object{sync, managed, notices} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, shard := range []string{"driftless-shard-1", "driftless-shard-2"} {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: shard}, &d); err != nil {
			t.Fatalf("install --shards 2 made no Deployment %s: %v", shard, err)
		}
	}

	if code, out, errOut := run("", "uninstall", "--timeout", "2m"); code != 0 {
		t.Fatalf("uninstall failed: %s\n%s", errOut, out)
	}
	gone := func(obj client.Object) bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "driftless"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "driftless"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "driftless-shard-1"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "driftless-shard-2"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "driftless-push-relay"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.RelayConfigMap}},
	} {
		if !gone(obj) {
			t.Errorf("uninstall left %T %s", obj, obj.GetName())
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "driftless-shard"}); err != nil || len(pods.Items) != 0 {
		t.Errorf("after uninstall the shards' pods: %d, %v; want none", len(pods.Items), err)
	}
	if gone(&v1alpha1.Sync{ObjectMeta: sync.ObjectMeta}) || gone(&corev1.ConfigMap{ObjectMeta: managed.ObjectMeta}) {
		t.Errorf("uninstall without --crds removed the Sync or its object")
	}

	if code, _, errOut := run("n\n", "uninstall", "--crds"); code == 0 || !strings.Contains(errOut, "not confirmed") {
		t.Errorf("uninstall --crds answered no: exit %d, %s; want a refusal", code, errOut)
	}
	// Every Sync of the cluster goes: this test's and the root Syncs of
	// the agents the other tests installed.
	if code, out, errOut := run("", "uninstall", "--crds", "--yes"); code != 0 || !strings.Contains(out, "removed the Sync CRD and ") {
		t.Fatalf("uninstall --crds --yes: exit %d: %s\n%s", code, errOut, out)
	}
	deadline := time.Now().Add(time.Minute)
	for !gone(&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "syncs.driftless.dev"}}) {
		if time.Now().After(deadline) {
			t.Fatal("the Sync CRD is still there a minute after uninstall --crds")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if gone(&corev1.ConfigMap{ObjectMeta: managed.ObjectMeta}) {
		t.Errorf("uninstall --crds deleted a managed object")
	}
}
