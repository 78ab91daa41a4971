package crd_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func TestEmbeddedCRDDecodesAsTheSyncKind(t *testing.T) {
	got, err := crd.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != "apiextensions.k8s.io/v1" || got.Kind != "CustomResourceDefinition" {
		t.Errorf("apiVersion/kind = %s/%s, want apiextensions.k8s.io/v1/CustomResourceDefinition (needed to apply it as is)",
			got.APIVersion, got.Kind)
	}
	if got.Name != "syncs.driftless.dev" {
		t.Errorf("name = %q, want syncs.driftless.dev", got.Name)
	}
	if got.Spec.Group != v1alpha1.GroupVersion.Group {
		t.Errorf("group = %q, want %q", got.Spec.Group, v1alpha1.GroupVersion.Group)
	}
	if got.Spec.Names.Kind != v1alpha1.SyncKind || got.Spec.Names.Plural != "syncs" {
		t.Errorf("names = %s/%s, want Sync/syncs", got.Spec.Names.Kind, got.Spec.Names.Plural)
	}
	if got.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope = %s, want Namespaced", got.Spec.Scope)
	}
	if len(got.Spec.Versions) != 1 || got.Spec.Versions[0].Name != v1alpha1.GroupVersion.Version {
		t.Fatalf("versions = %v, want only %s", got.Spec.Versions, v1alpha1.GroupVersion.Version)
	}
	v := got.Spec.Versions[0]
	if !v.Served || !v.Storage {
		t.Errorf("served=%v storage=%v, want both", v.Served, v.Storage)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("no status subresource: the controller's status writes would touch spec")
	}
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Errorf("no OpenAPI schema: the API server would accept any spec")
	}
}

func TestSyncCRDReturnsACopyEachCall(t *testing.T) {
	first, err := crd.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	first.Labels = map[string]string{"changed": "by caller"}
	first.Spec.Versions[0].Served = false
	second, err := crd.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	if second.Labels != nil || !second.Spec.Versions[0].Served {
		t.Errorf("a caller's change to one result leaked into the next: labels %v, served %v",
			second.Labels, second.Spec.Versions[0].Served)
	}
}

func TestValidSyncGetsDefaults(t *testing.T) {
	c := installSyncCRD(t)
	ns := env.Namespace(t)

	// Created as a user writes it in YAML, without interval, timeout and
	// prune. (A typed v1alpha1.Sync cannot leave interval out: it is a
	// struct, which omitempty never omits, so Go clients send "0s".)
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       v1alpha1.SyncKind,
		"metadata":   map[string]any{"name": "fleet", "namespace": ns},
		"spec": map[string]any{
			"source": map[string]any{"git": map[string]any{
				"url":    "ssh://git@github.com/example/fleet.git",
				"branch": "master",
			}},
			"paths": []any{"namespaces", "workloads"},
		},
	}}
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatalf("create a valid Sync: %v", err)
	}

	var got v1alpha1.Sync
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Interval.Duration != 5*time.Minute {
		t.Errorf("spec.interval = %v, want the default 5m", got.Spec.Interval.Duration)
	}
	if got.Spec.Timeout == nil || got.Spec.Timeout.Duration != 5*time.Minute {
		t.Errorf("spec.timeout = %v, want the default 5m", got.Spec.Timeout)
	}
	if got.Spec.Prune == nil || !*got.Spec.Prune {
		t.Errorf("spec.prune = %v, want the default true", got.Spec.Prune)
	}
	if got.Spec.Source.Git.Branch != "master" {
		t.Errorf("spec.source.git.branch = %q, want master", got.Spec.Source.Git.Branch)
	}
	if got.Spec.DeletionPolicy != v1alpha1.DeletionOrphan {
		t.Errorf("spec.deletionPolicy = %q, want the default Orphan", got.Spec.DeletionPolicy)
	}
}

func TestSyncNamesTooLongForTheSyncLabelAreRejected(t *testing.T) {
	c := installSyncCRD(t)
	ns := env.Namespace(t)

	// Objects are labelled driftless.dev/sync=<namespace>.<name>, at most
	// 63 characters: with the shortest namespace, a name has 61.
	err := c.Create(t.Context(), newSync(ns, strings.Repeat("a", 62)))
	if err == nil {
		t.Fatal("created a Sync with a 62-character name; its objects' label value could never be written")
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name must be at most 61 characters") {
		t.Errorf("error %q is not Invalid saying the name is at most 61 characters", err)
	}
	if err := c.Create(t.Context(), newSync(ns, strings.Repeat("a", 61))); err != nil {
		t.Errorf("create a Sync with a 61-character name: %v", err)
	}
}

func TestInvalidSyncsAreRejected(t *testing.T) {
	installSyncCRD(t)
	ns := env.Namespace(t)
	const url = "ssh://git@github.com/example/fleet.git"
	const commit = "0123456789abcdef0123456789abcdef01234567"

	tests := []struct {
		name string
		git  map[string]any
		spec map[string]any // merged into spec next to source
		want string
	}{
		{
			name: "a branch and a tag",
			git:  map[string]any{"url": url, "branch": "master", "tag": "v1.0.0"},
			want: "set at most one of branch, tag and commit",
		},
		{
			name: "a tag and a commit",
			git:  map[string]any{"url": url, "tag": "v1.0.0", "commit": commit},
			want: "set at most one of branch, tag and commit",
		},
		{
			name: "a branch, a tag and a commit",
			git:  map[string]any{"url": url, "branch": "master", "tag": "v1.0.0", "commit": commit},
			want: "set at most one of branch, tag and commit",
		},
		{
			name: "no git url",
			git:  map[string]any{"branch": "master"},
			want: "spec.source.git.url: Required value",
		},
		{
			name: "an empty git url",
			git:  map[string]any{"url": ""},
			want: "spec.source.git.url",
		},
		{
			name: "a short commit",
			git:  map[string]any{"url": url, "commit": "0123abc"},
			want: "spec.source.git.commit",
		},
		{
			name: "an unknown deletionPolicy",
			git:  map[string]any{"url": url},
			spec: map[string]any{"deletionPolicy": "Keep"},
			want: "spec.deletionPolicy",
		},
		{
			name: "an interval that is not a duration",
			git:  map[string]any{"url": url},
			spec: map[string]any{"interval": "5 minutes"},
			want: "spec.interval",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := map[string]any{"source": map[string]any{"git": tt.git}}
			for k, v := range tt.spec {
				spec[k] = v
			}
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.GroupVersion.String(),
				"kind":       v1alpha1.SyncKind,
				"metadata":   map[string]any{"name": fmt.Sprintf("invalid-%d", i), "namespace": ns},
				"spec":       spec,
			}}
			err := env.Client.Create(t.Context(), u)
			if err == nil {
				t.Fatalf("created a Sync with %s; want it rejected with %q", tt.name, tt.want)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("error is not Invalid (422): %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestStatusIsASubresource(t *testing.T) {
	c := installSyncCRD(t)
	ns := env.Namespace(t)
	s := newSync(ns, "web")
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}

	s.Status.LastAppliedRevision = "written-with-the-spec"
	s.Spec.Paths = []string{"apps"}
	if err := c.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.Sync
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(s), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastAppliedRevision != "" {
		t.Errorf("an update of the Sync wrote status.lastAppliedRevision = %q; status must only change through /status",
			got.Status.LastAppliedRevision)
	}

	got.Status.LastAppliedRevision = "master@sha1:0123456"
	if err := c.Status().Update(t.Context(), &got); err != nil {
		t.Fatalf("update /status: %v", err)
	}
	var after v1alpha1.Sync
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(s), &after); err != nil {
		t.Fatal(err)
	}
	if after.Status.LastAppliedRevision != "master@sha1:0123456" {
		t.Errorf("status.lastAppliedRevision = %q after /status update", after.Status.LastAppliedRevision)
	}
	if after.Generation != got.Generation {
		t.Errorf("a status update bumped generation %d -> %d", got.Generation, after.Generation)
	}
}

func TestKubectlGetSyncsShowsRevisionReadyAndAge(t *testing.T) {
	c := installSyncCRD(t)
	ns := env.Namespace(t)
	s := newSync(ns, "fleet")
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	s.Status.LastAppliedRevision = "master@sha1:0123456"
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type:    v1alpha1.ConditionReady,
		Status:  metav1.ConditionTrue,
		Reason:  v1alpha1.ReasonSucceeded,
		Message: "applied revision master@sha1:0123456",
	})
	if err := c.Status().Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}

	out := kubectl(t, "get", "syncs", "-n", ns)
	header, row := twoLines(t, out)
	if got, want := strings.Fields(header), []string{"NAME", "REVISION", "READY", "AGE"}; !slices.Equal(got, want) {
		t.Errorf("kubectl get syncs columns = %v, want %v\n%s", got, want, out)
	}
	if got := strings.Fields(row); len(got) != 4 || got[0] != "fleet" || got[1] != "master@sha1:0123456" || got[2] != "True" {
		t.Errorf("kubectl get syncs row = %v, want [fleet master@sha1:0123456 True <age>]\n%s", got, out)
	}

	wide := kubectl(t, "get", "syncs", "-n", ns, "-o", "wide")
	header, row = twoLines(t, wide)
	if got, want := strings.Fields(header), []string{"NAME", "REVISION", "READY", "STATUS", "AGE"}; !slices.Equal(got, want) {
		t.Errorf("kubectl get syncs -o wide columns = %v, want %v\n%s", got, want, wide)
	}
	if !strings.Contains(row, "applied revision master@sha1:0123456") {
		t.Errorf("kubectl get syncs -o wide does not show the Ready message:\n%s", wide)
	}
}

// installSyncCRD server-side applies the embedded CRD, as the agent does at
// start, waits until it is Established and served, and returns a client
// that knows the v1alpha1 types.
func installSyncCRD(t *testing.T) client.Client {
	t.Helper()
	ctx := t.Context()
	def, err := crd.SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(def)
	if err != nil {
		t.Fatal(err)
	}
	// Status belongs to the API server; creationTimestamp is an empty
	// value the converter writes out.
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: obj}),
		client.FieldOwner("driftless"), client.ForceOwnership); err != nil {
		t.Fatalf("server-side apply the Sync CRD: %v", err)
	}

	scheme := testenv.Scheme()
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var live apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: def.Name}, &live); err != nil {
			return false, err
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				// Established can precede the first successful list by a
				// moment; the tests need both.
				return c.List(ctx, &v1alpha1.SyncList{}) == nil, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not Established and served within 30s: %v", def.Name, err)
	}
	return c
}

func newSync(namespace, name string) *v1alpha1.Sync {
	return &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: "ssh://git@github.com/example/fleet.git"}},
		},
	}
}

// kubectl runs the real kubectl against the test control plane, with a
// private discovery cache so a CRD installed a moment ago is seen.
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

func twoLines(t *testing.T, out string) (header, row string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row, got:\n%s", out)
	}
	return lines[0], lines[1]
}
