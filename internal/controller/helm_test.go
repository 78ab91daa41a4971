package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// webChart is a repository with a chart in charts/web and a HelmChart in
// apps/web that renders it with values from a values file, a ConfigMap of
// the cluster and inline.
func webChart() map[string]string {
	return map[string]string{
		"charts/web/Chart.yaml":             "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/values.yaml":            "memory: 256Mi\ncolor: red\ngreeting: hello\n",
		"charts/web/values-production.yaml": "memory: 512Mi\n",
		"charts/web/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 0
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        resources:
          limits:
            memory: {{ .Values.memory | quote }}
`,
		"charts/web/templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  color: {{ .Values.color }}
  greeting: {{ .Values.greeting }}
  kube: {{ .Capabilities.KubeVersion.Version }}
`,
		"apps/web/helmchart.yaml": `apiVersion: driftless.dev/v1alpha1
kind: HelmChart
metadata:
  name: web
spec:
  chart: {path: charts/web}
  valuesFiles: [charts/web/values-production.yaml]
  valuesFrom: [{kind: ConfigMap, name: web-values}]
  values: {greeting: hi}
`,
		"apps/other.yaml": configMap("other", "v1"),
	}
}

// createValues creates the ConfigMap web-values the HelmChart reads.
func createValues(t *testing.T, ns string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-values", Namespace: ns}, Data: map[string]string{"values.yaml": "color: green\n"}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

func TestSyncRendersAHelmChartOfTheRepository(t *testing.T) {
	h := newHarness(t)
	h.r.RenderOptions.Reader = c
	h.r.Discovery = env.Clientset.Discovery()
	createValues(t, h.ns)
	first := h.repo.Commit(t, "chart", webChart())
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })

	h.expectReady(h.reconcile("shop"))
	deploy := get(t, "apps/v1", "Deployment", h.ns, "web")
	if deploy == nil {
		t.Fatal("Deployment web of the chart not created")
	}
	if got := memoryLimit(t, deploy); got != "512Mi" {
		t.Errorf("memory limit = %s, want 512Mi from the values file", got)
	}
	if got, want := deploy.GetAnnotations()[v1alpha1.OriginAnnotation], "apps/web/helmchart.yaml → web/templates/deployment.yaml@"+first[:7]; got != want {
		t.Errorf("origin = %q, want %q", got, want)
	}
	server, err := env.Clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	cm := get(t, "v1", "ConfigMap", h.ns, "web-config")
	if cm == nil {
		t.Fatal("ConfigMap web-config of the chart not created")
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if data["color"] != "green" || data["greeting"] != "hi" || data["kube"] != server.GitVersion {
		t.Errorf("ConfigMap data = %v, want color green (valuesFrom), greeting hi (inline), kube %s (the cluster's)", data, server.GitVersion)
	}
	var secrets corev1.SecretList
	if err := c.List(context.Background(), &secrets, client.InNamespace(h.ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		t.Errorf("a Helm release Secret was written: %s", secrets.Items[0].Name)
	}

	// A template error fails the build naming the template, and nothing of
	// that revision is written.
	broken := webChart()
	broken["charts/web/values-production.yaml"] = "memory: 1Gi\n"
	broken["charts/web/templates/configmap.yaml"] += "  bad: {{ fail \"set a color\" }}\n"
	h.repo.Commit(t, "broken template", broken)
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonBuildFailed, "apps/web/helmchart.yaml", "web/templates/configmap.yaml:9", "set a color")
	if got := memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "web")); got != "512Mi" {
		t.Errorf("memory limit after a failed build = %s, want 512Mi still", got)
	}

	// Removing the HelmChart prunes the chart's objects.
	gone := webChart()
	gone["apps/web/helmchart.yaml"] = ""
	h.repo.Commit(t, "remove the chart", gone)
	h.expectReady(h.reconcile("shop"))
	if get(t, "apps/v1", "Deployment", h.ns, "web") != nil || get(t, "v1", "ConfigMap", h.ns, "web-config") != nil {
		t.Error("the chart's objects were not pruned when the HelmChart was removed")
	}
	if get(t, "v1", "ConfigMap", h.ns, "other") == nil {
		t.Error("the plain ConfigMap beside the HelmChart was pruned")
	}
}

func TestDriftOnAChartObjectIsReverted(t *testing.T) {
	h := newHarness(t)
	createValues(t, h.ns)
	rev := h.repo.Commit(t, "chart", webChart())
	// A long interval: only the watch can revert within the test.
	h.createSync("shop", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"apps"}
		s.Spec.Interval = metav1.Duration{Duration: time.Hour}
	})
	startAgent(t, false) // the agent's own wiring: valuesFrom and capabilities from the cluster
	h.waitReady("shop", rev)

	edit(t, h.ns, "web", "2Gi", nil)
	eventually(t, "the chart's memory limit reverted to 512Mi", func() bool {
		return memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "web")) == "512Mi"
	})
	eventually(t, "an Event naming the HelmChart to change", func() bool {
		for _, n := range objectEvents(t, h.ns, "Deployment", "web") {
			if strings.Contains(n, "change it in git: apps/web/helmchart.yaml") {
				return true
			}
		}
		return false
	})
}

// A chart's template may quote a value it read from a valuesFrom Secret
// in its error (fail, required): the Ready message, history and events
// show the error with the value masked.
func TestAChartErrorQuotingAValueFromASecretIsMasked(t *testing.T) {
	h := newHarness(t)
	h.r.Discovery = env.Clientset.Discovery()
	const password = "pw-7Hq2-Zx91-s3cr3t"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-secret", Namespace: h.ns},
		StringData: map[string]string{"values.yaml": "password: " + password + "\n"}}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	files := webChart()
	files["apps/web/helmchart.yaml"] = strings.Replace(files["apps/web/helmchart.yaml"],
		"valuesFrom: [{kind: ConfigMap, name: web-values}]", "valuesFrom: [{kind: Secret, name: web-secret}]", 1)
	files["charts/web/templates/configmap.yaml"] += "  bad: {{ fail (printf \"the password %q is too weak\" .Values.password) }}\n"
	h.repo.Commit(t, "a chart that fails quoting a Secret value", files)
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })

	s := h.reconcile("shop")
	h.expectFailed(s, v1alpha1.ReasonBuildFailed, "web/templates/configmap.yaml", "is too weak")
	for _, where := range []string{ready(s).Message, fmt.Sprint(s.Status.History)} {
		if strings.Contains(where, password) || strings.Contains(where, password[:8]) {
			t.Errorf("the Secret's value shows: %s", where)
		}
	}
}
