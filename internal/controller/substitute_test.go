package controller

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

const substituted = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
data:
  region: ${region}
  team: ${team}
  token: ${token}
  greeting: ${greeting:=hello}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: ${replicas}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: web, image: "nginx:${nginx}"}
`

func TestSyncSubstitutesVariablesFromTheSyncConfigMapsAndSecrets(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	vars := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-vars", Namespace: h.ns},
		Data:       map[string]string{"region": "eu-west-1", "replicas": "0", "team": "overridden", "nginx": "1.27"},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-secrets", Namespace: h.ns},
		Data:       map[string][]byte{"token": []byte("s3cret-token")},
	}
	if err := c.Create(ctx, vars); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	h.repo.Commit(t, "app", map[string]string{"apps/web.yaml": substituted})
	h.createSync("shop", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"apps"}
		s.Spec.Substitute = map[string]string{"team": "shop"}
		s.Spec.SubstituteFrom = []v1alpha1.SubstituteReference{
			{Kind: "ConfigMap", Name: "cluster-vars"},
			{Kind: "Secret", Name: "cluster-secrets"},
			{Kind: "ConfigMap", Name: "not-there", Optional: true},
		}
	})

	h.expectReady(h.reconcile("shop"))
	data := func() map[string]string {
		t.Helper()
		cm := get(t, "v1", "ConfigMap", h.ns, "web-settings")
		if cm == nil {
			t.Fatal("ConfigMap web-settings not created")
		}
		got, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		return got
	}
	want := map[string]string{"region": "eu-west-1", "team": "shop", "token": "s3cret-token", "greeting": "hello"}
	if got := data(); !maps.Equal(got, want) {
		t.Errorf("data = %v, want %v: spec.substitute overrides substituteFrom, a Secret gives its value, a default fills in", got, want)
	}
	deploy := get(t, "apps/v1", "Deployment", h.ns, "web")
	if deploy == nil {
		t.Fatal("Deployment web not created: replicas: ${replicas} must become a number")
	}

	// A changed ConfigMap re-renders at the next sync, with no new commit.
	vars.Data["region"] = "us-east-1"
	if err := c.Update(ctx, vars); err != nil {
		t.Fatal(err)
	}
	h.expectReady(h.reconcile("shop"))
	if got := data()["region"]; got != "us-east-1" {
		t.Errorf("region = %q after the ConfigMap changed, want us-east-1", got)
	}

	// A variable nobody defines fails the render; nothing of that
	// revision is written and the Secret's value is nowhere in the message.
	h.repo.Commit(t, "more", map[string]string{"apps/web.yaml": strings.Replace(substituted, "greeting: ${greeting:=hello}", "greeting: ${greeting}", 1)})
	s := h.reconcile("shop")
	h.expectFailed(s, v1alpha1.ReasonBuildFailed, "apps/web.yaml", "ConfigMap/web-settings", "data.greeting", "variable greeting is not defined")
	if strings.Contains(ready(s).Message, "s3cret-token") {
		t.Errorf("Ready message shows the Secret's value:\n%s", ready(s).Message)
	}
	if got := data()["greeting"]; got != "hello" {
		t.Errorf("greeting = %q after a failed render, want hello still", got)
	}

	// A Secret that is not optional and does not exist fails the sync,
	// naming it.
	s.Spec.SubstituteFrom = append(s.Spec.SubstituteFrom, v1alpha1.SubstituteReference{Kind: "Secret", Name: "gone"})
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonBuildFailed, "Secret "+h.ns+"/gone of spec.substituteFrom[3] does not exist")
}

func TestSyncRefusesVariableNamesThatCannotBeReferenced(t *testing.T) {
	h := newHarness(t)
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: h.ns},
		Spec: v1alpha1.SyncSpec{
			Source:     v1alpha1.Source{Git: v1alpha1.GitSource{URL: h.repo.FileURL()}},
			Substitute: map[string]string{"my-var": "x"},
		},
	}
	err := c.Create(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "variable names must match") {
		t.Errorf("create = %v, want the API server to refuse the variable name my-var", err)
	}
}

func TestDriftOfAnObjectWithASecretValueIsReportedMasked(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-secrets", Namespace: h.ns},
		Data:       map[string][]byte{"token": []byte("s3cret-token")},
	}); err != nil {
		t.Fatal(err)
	}
	rev := h.repo.Commit(t, "app", map[string]string{"apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: auth\ndata:\n  header: Bearer ${token}\n"})
	h.createSync("shop", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"apps"}
		s.Spec.Interval = metav1.Duration{Duration: time.Hour}
		s.Spec.SubstituteFrom = []v1alpha1.SubstituteReference{{Kind: "Secret", Name: "cluster-secrets"}}
	})
	startAgent(t, false)
	h.waitReady("shop", rev)

	cm := get(t, "v1", "ConfigMap", h.ns, "auth")
	_ = unstructured.SetNestedField(cm.Object, "Bearer s3cret-token-edited", "data", "header")
	if err := c.Update(ctx, cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	// The value is hidden, in every form; what the editor added is not.
	want := "reverted data.header: Bearer ***-edited → Bearer *** (changed by kubectl-edit"
	eventually(t, "an Event on the ConfigMap explaining the revert, masked", func() bool {
		for _, n := range objectEvents(t, h.ns, "ConfigMap", "auth") {
			if strings.Contains(n, want) {
				return true
			}
		}
		return false
	})
	for _, n := range objectEvents(t, h.ns, "ConfigMap", "auth") {
		if strings.Contains(n, "s3cret") {
			t.Errorf("an Event shows the Secret's value: %s", n)
		}
	}
	if s := h.syncNow("shop"); len(s.Status.Drift) == 0 || strings.Contains(s.Status.Drift[0].Message, "s3cret") ||
		s.Status.Drift[0].Fields[0].Git != "Bearer ***" || s.Status.Drift[0].Fields[0].Found != "Bearer ***-edited" {
		t.Errorf("status.drift = %+v, want an incident with masked values", s.Status.Drift)
	}
}
