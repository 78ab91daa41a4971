package drift

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const gitDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: sidecar
        image: envoy:1
      - name: app
        image: nginx:1.27
        resources: {limits: {memory: 512Mi}}
`

func editedLive(t *testing.T, memory string, replicas int) *unstructured.Unstructured {
	live := parse(t, strings.Replace(gitDeployment, "512Mi", memory, 1))
	_ = unstructured.SetNestedField(live.Object, int64(replicas), "spec", "replicas")
	at := metav1.NewTime(time.Date(2026, 11, 30, 12, 3, 7, 0, time.UTC))
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "driftless", Operation: metav1.ManagedFieldsOperationApply, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:selector":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"sidecar\"}":{"f:image":{}}}}}}}`)},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:resources":{"f:limits":{"f:memory":{}}}}}}}}}`)},
		{Manager: "horizontal-pod-autoscaler", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
	})
	return live
}

func TestAttributeNamesFieldValuesAndManager(t *testing.T) {
	desired := parse(t, gitDeployment)
	applied := parse(t, gitDeployment)
	_ = unstructured.SetNestedField(applied.Object, int64(5), "spec", "replicas")
	live := editedLive(t, "1Gi", 5)

	got := Attribute(desired, applied, live, "driftless")
	want := []FieldChange{{
		Path:    "spec.template.spec.containers[app].resources.limits.memory",
		Git:     "512Mi",
		Found:   "1Gi",
		Manager: "kubectl-edit",
		At:      time.Date(2026, 11, 30, 12, 3, 7, 0, time.UTC),
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Attribute (-want +got):\n%s", diff)
	}
	if s := got[0].String(); s != "spec.template.spec.containers[app].resources.limits.memory: 1Gi → 512Mi (changed by kubectl-edit at 12:03:07)" {
		t.Errorf("String() = %q", s)
	}
}

func TestAttributeIgnoresFieldsGitDoesNotSet(t *testing.T) {
	desired := parse(t, gitDeployment)
	// An autoscaler set replicas; git does not set replicas at all.
	live := editedLive(t, "512Mi", 7)
	applied := live.DeepCopy()
	if got := Attribute(desired, applied, live, "driftless"); len(got) != 0 {
		t.Errorf("Attribute reported fields git does not set: %v", got)
	}
}

func TestAttributeMasksSecretData(t *testing.T) {
	desired := parse(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {password: c2VjcmV0}\n")
	applied := desired.DeepCopy()
	live := parse(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ndata: {password: aGFja2Vk}\n")
	got := Attribute(desired, applied, live, "driftless")
	if len(got) != 1 || got[0].Path != "data.password" {
		t.Fatalf("Attribute = %v, want the changed data.password", got)
	}
	for _, s := range []string{got[0].String(), got[0].Git, got[0].Found} {
		if strings.Contains(s, "c2VjcmV0") || strings.Contains(s, "aGFja2Vk") {
			t.Errorf("Secret value leaked: %q", s)
		}
	}
}

func TestAttributeReportsRemovedFields(t *testing.T) {
	desired := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, labels: {team: shop}}\ndata: {a: '1', b: '2'}\n")
	applied := desired.DeepCopy()
	live := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1'}\n")
	var paths []string
	for _, c := range Attribute(desired, applied, live, "driftless") {
		paths = append(paths, c.Path+"="+c.Found)
	}
	if diff := cmp.Diff([]string{"data.b=<absent>", "metadata.labels=<absent>"}, paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}
