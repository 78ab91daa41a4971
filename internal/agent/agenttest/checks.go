package agenttest

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// AppliedAt is a check for Eventually: the Sync key, read with c, is
// Ready=True at revision.
func AppliedAt(c client.Client, key client.ObjectKey, revision string) func() string {
	return func() string {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), key, &s); err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || s.Status.LastAppliedRevision != revision {
			return fmt.Sprintf("Ready = %+v, lastAppliedRevision = %q, want True at %s", ready, s.Status.LastAppliedRevision, revision)
		}
		return ""
	}
}

// Greeting returns data.greeting of the ConfigMap namespace/name (as
// ConfigMap writes it), or "" if it does not exist.
func Greeting(t testing.TB, c client.Client, namespace, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return ""
		}
		t.Fatalf("get ConfigMap %s/%s: %v", namespace, name, err)
	}
	return cm.Data["greeting"]
}

// ConfigMap is the manifest of a ConfigMap whose data.greeting is
// greeting, to commit to a test's git repository.
func ConfigMap(namespace, name, greeting string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  greeting: %q\n", name, namespace, greeting)
}

// Deployment is the manifest of a Deployment of no replicas, to commit
// to a test's git repository.
func Deployment(namespace, name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: %[2]s}
  template:
    metadata:
      labels: {app: %[2]s}
    spec:
      containers:
      - name: app
        image: nginx:1.27
`, namespace, name)
}
