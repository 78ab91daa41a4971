// Tests of the install manifests: what `kubectl apply -k config/default`
// would put into a cluster, checked with the real kubectl (kustomize is built
// into it) against a real API server.
package config_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

const namespace = "driftless-system"

func TestDefaultKustomizationHasCRDAgentAndRBAC(t *testing.T) {
	objs := build(t)

	t.Run("the Sync CRD, as embedded in the agent", func(t *testing.T) {
		got := find[*apiextensionsv1.CustomResourceDefinition](t, objs, "", "syncs.driftless.dev")
		want, err := crd.SyncCRD()
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
			t.Errorf("config/default installs a different Sync CRD spec than crd.SyncCRD() returns")
		}
	})

	t.Run("the agent Deployment with the seed's flags", func(t *testing.T) {
		d := find[*appsv1.Deployment](t, objs, namespace, "driftless")
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("replicas = %v, want 1", d.Spec.Replicas)
		}
		pod := d.Spec.Template.Spec
		if pod.ServiceAccountName != "driftless" {
			t.Errorf("serviceAccountName = %q, want driftless", pod.ServiceAccountName)
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("%d containers, want 1", len(pod.Containers))
		}
		c := pod.Containers[0]
		wantArgs := []string{
			"agent",
			"--git-url=ssh://git@github.com/example/fleet.git",
			"--git-branch=master",
			"--git-path=namespaces,workloads",
			"--sync-interval=1m",
			"--git-secret=driftless-git-deploy",
			"--sync-service-account=driftless-root",
		}
		if !slices.Equal(c.Args, wantArgs) {
			t.Errorf("args = %q, want %q", c.Args, wantArgs)
		}
		if !hasPodNamespaceEnv(c.Env) {
			t.Errorf("no POD_NAMESPACE from metadata.namespace in env %v", c.Env)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("root filesystem is not read-only")
		}
		if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("pod may run as root")
		}
		if !mountsEmptyDir(pod, c, "/tmp") {
			t.Errorf("no writable emptyDir at /tmp for git checkouts")
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || !portIs(c, p.HTTPGet.Port.String(), 8081) {
			t.Errorf("liveness probe is not GET /healthz on 8081: %+v", p)
		}
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || !portIs(c, p.HTTPGet.Port.String(), 8081) {
			t.Errorf("readiness probe is not GET /readyz on 8081: %+v", p)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("no memory request and limit: %v", c.Resources)
		}
	})

	t.Run("cluster-admin bound to the root Sync's service account only", func(t *testing.T) {
		find[*corev1.ServiceAccount](t, objs, namespace, "driftless")
		find[*corev1.ServiceAccount](t, objs, namespace, "driftless-root")
		b := find[*rbacv1.ClusterRoleBinding](t, objs, "", "driftless-root-cluster-admin")
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != "cluster-admin" {
			t.Errorf("roleRef = %s/%s, want ClusterRole/cluster-admin", b.RoleRef.Kind, b.RoleRef.Name)
		}
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "driftless-root", Namespace: namespace}}
		if !equality.Semantic.DeepEqual(b.Subjects, want) {
			t.Errorf("subjects = %+v, want %+v", b.Subjects, want)
		}
		find[*rbacv1.ClusterRole](t, objs, "", "driftless-manager")
		find[*rbacv1.Role](t, objs, namespace, "driftless-leader-election")
	})
}

// The dry run is on the server, so the API server checks every object
// against its real schema, admission and the RBAC escalation rules (a
// client dry run only checks that the YAML parses). A server dry run does
// not persist the Namespace it "creates", so the namespaced objects in it
// would be refused with "namespaces \"driftless-system\" not found"; the
// test therefore creates the namespace first, as an earlier install would
// have.
func TestDefaultKustomizationAppliesWithServerDryRun(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), ns) })

	out := kubectl(t, "apply", "-k", filepath.Join(repoRoot(t), "config", "default"), "--dry-run=server")
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/syncs.driftless.dev created (server dry run)",
		"deployment.apps/driftless created (server dry run)",
		"clusterrolebinding.rbac.authorization.k8s.io/driftless-root-cluster-admin created (server dry run)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k config/default --dry-run=server does not say %q:\n%s", want, out)
		}
	}
}

// build runs `kubectl kustomize config/default` and decodes its output.
func build(t *testing.T) []runtime.Object { t.Helper(); return buildDir(t, "default") }

// buildDir builds the kustomization config/dir.
func buildDir(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	out := kubectl(t, "kustomize", filepath.Join(repoRoot(t), "config", dir))

	scheme := testenv.Scheme()
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []runtime.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("kustomize output does not decode: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

// find returns the object of type T with the namespace and name, or fails.
func find[T client.Object](t *testing.T, objs []runtime.Object, namespace, name string) T {
	t.Helper()
	for _, o := range objs {
		if typed, ok := o.(T); ok && typed.GetNamespace() == namespace && typed.GetName() == name {
			return typed
		}
	}
	var zero T
	t.Fatalf("kustomize output has no %T %s/%s", zero, namespace, name)
	return zero
}

func hasPodNamespaceEnv(env []corev1.EnvVar) bool {
	for _, e := range env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			return true
		}
	}
	return false
}

func mountsEmptyDir(pod corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path || m.ReadOnly {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

// portIs reports whether port, a number or a container port name, is number.
func portIs(c corev1.Container, port string, number int32) bool {
	for _, p := range c.Ports {
		if p.Name == port {
			return p.ContainerPort == number
		}
	}
	return port == strconv.Itoa(int(number))
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(testenv.DefaultBinDir(), "kubectl")
	args = append([]string{"--kubeconfig", env.ControlPlane.KubeconfigPath(), "--cache-dir", t.TempDir()}, args...)
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
