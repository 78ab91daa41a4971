package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/config"

	// The agent's metrics register as the driftless binary links them.
	_ "github.com/driftless/driftless/internal/cli"
	"github.com/driftless/driftless/internal/testenv"
)

// prometheusOwn are the series Prometheus makes itself, per target.
var prometheusOwn = map[string]bool{"up": true}

// query is one PromQL expression of the dashboard or the rules, and where.
type query struct{ where, expr string }

type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int     `json:"id"`
	Type        string  `json:"type"`
	Title       string  `json:"title"`
	Description string  `json:"description"`
	Panels      []panel `json:"panels"`
	Targets     []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert"`
			Record string `json:"record"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// read decodes the YAML or JSON file into v.
func read(t *testing.T, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func readDashboard(t *testing.T) (dashboard, []panel) {
	t.Helper()
	var d dashboard
	read(t, "driftless-dashboard.json", &d)
	var all []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return d, all
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	read(t, "alerts.yaml", &rf)
	return rf
}

// queries returns every expression of the dashboard (panels and template
// variables) and of the rules.
func queries(t *testing.T) []query {
	t.Helper()
	d, panels := readDashboard(t)
	var qs []query
	for _, p := range panels {
		for _, target := range p.Targets {
			qs = append(qs, query{"dashboard panel " + p.Title, target.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("dashboard variable %s: %v", v.Name, err)
		}
		qs = append(qs, query{"dashboard variable " + v.Name, q.Query})
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{"alerts.yaml rule " + r.Alert + r.Record, r.Expr})
		}
	}
	return qs
}

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// registered reports whether the agent's registry (what its /metrics
// serves) has a metric called name. A registry does not list what it
// holds, and a vector with no series yet gathers nothing; but it refuses a
// second metric of a name it has with another help text, so a probe
// registration that succeeds means the name is free (and is undone).
func registered(name string) bool {
	if !metricName.MatchString(name) {
		return false
	}
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "a probe of config/monitoring's test"})
	if err := metrics.Registry.Register(probe); err != nil {
		return true
	}
	metrics.Registry.Unregister(probe)
	return false
}

// registeredOrSeries is registered, allowing the series a histogram or
// summary adds to its name.
func registeredOrSeries(name string) bool {
	if registered(name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered(base) {
			return true
		}
	}
	return false
}

func TestEveryMetricTheDashboardAndAlertsNameIsOneTheAgentRegisters(t *testing.T) {
	if registered("driftless_no_such_metric") {
		t.Fatal("the probe finds a metric that does not exist")
	}
	seen := map[string]bool{}
	for _, q := range queries(t) {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric found in %q", q.where, q.expr)
		}
		for _, name := range names {
			seen[name] = true
			if !prometheusOwn[name] && !registeredOrSeries(name) {
				t.Errorf("%s reads %s, which the agent does not register (expression %q)", q.where, name, q.expr)
			}
		}
	}
	// What the issue asks the dashboard and alerts to show.
	for _, name := range []string{"driftless_sync_ready", "driftless_sync_duration_seconds_bucket", "driftless_drift_reverted_total",
		"driftless_drift_fights_total", "driftless_webhook_requests_total", "driftless_notifications_total", "driftless_image_updates_total",
		"driftless_sync_failures_total", "process_resident_memory_bytes", "process_cpu_seconds_total", "workqueue_depth", "up"} {
		if !seen[name] {
			t.Errorf("neither the dashboard nor the alerts read %s", name)
		}
	}
}

func TestDashboardPanelsAreDescribed(t *testing.T) {
	_, panels := readDashboard(t)
	ids := map[int]string{}
	doc := monitoringDoc(t)
	for _, p := range panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", p.Title, other, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Description == "" {
			t.Errorf("panel %q has no description", p.Title)
		}
		if !strings.Contains(doc, "**"+p.Title+"**") {
			t.Errorf("docs/monitoring.md does not describe panel %q (as **%s**)", p.Title, p.Title)
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !strings.Contains(doc, "`"+r.Alert+"`") {
				t.Errorf("docs/monitoring.md does not describe alert %s", r.Alert)
			}
		}
	}
}

func monitoringDoc(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// root is the repository's root, from the test's directory.
var root = filepath.Join("..", "..")

func TestPrometheusRuleCarriesTheRulesOfAlertsYAML(t *testing.T) {
	var pr struct {
		Kind string   `json:"kind"`
		Spec ruleFile `json:"spec"`
	}
	read(t, "prometheusrule.yaml", &pr)
	if pr.Kind != "PrometheusRule" {
		t.Fatalf("prometheusrule.yaml holds a %q", pr.Kind)
	}
	if diff := cmp.Diff(readRules(t), pr.Spec); diff != "" {
		t.Errorf("prometheusrule.yaml's spec differs from alerts.yaml (-alerts.yaml +prometheusrule.yaml):\n%s", diff)
	}
}

// promtool returns the promtool `make promtool` builds, or skips the test
// (fails it under CI=true).
func promtool(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("DRIFTLESS_PROMTOOL_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin", "tools", "promtool")
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.MissingTool(t, "promtool is not at %s: run make promtool (or set DRIFTLESS_PROMTOOL_BIN) to check the alert rules", bin)
	}
	return bin
}

func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	run := func(args ...string) {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", "alerts.yaml")
	tests, err := filepath.Glob(filepath.Join("tests", "*.yaml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule tests in tests/: %v", err)
	}
	run(append([]string{"test", "rules"}, tests...)...)

	// Every alert has a unit test.
	var tested []string
	for _, file := range tests {
		var tf struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		read(t, file, &tf)
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				tested = append(tested, a.Alertname)
			}
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !slices.Contains(tested, r.Alert) {
				t.Errorf("alert %s has no test in tests/", r.Alert)
			}
		}
	}
}

// kustomize builds dir of the repository with kubectl, as
// `kubectl apply -k` would, into objects.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	bin := filepath.Join(testenv.DefaultBinDir(), "kubectl")
	if _, err := os.Stat(bin); err != nil {
		testenv.MissingTool(t, "kubectl is not at %s: run make controlplane", bin)
	}
	out, err := exec.CommandContext(t.Context(), bin, "kustomize", filepath.Join(root, dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func only(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

func TestServiceMonitorFindsTheAgentsMetricsAsInstalled(t *testing.T) {
	monitoring := kustomize(t, "config/monitoring")
	installed := kustomize(t, "config/default")
	sm := only(t, monitoring, "ServiceMonitor", "driftless")
	deployment := only(t, installed, "Deployment", "driftless")

	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	var selected []*unstructured.Unstructured
	for _, o := range installed {
		if o.GetKind() == "Service" && labels.SelectorFromSet(selector).Matches(labels.Set(o.GetLabels())) {
			selected = append(selected, o)
		}
	}
	if len(selected) != 1 || selected[0].GetName() != "driftless-metrics" {
		t.Fatalf("the ServiceMonitor selects %d Services of config/default, want only driftless-metrics", len(selected))
	}
	svc := selected[0]
	if names, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames"); !slices.Contains(names, svc.GetNamespace()) {
		t.Errorf("the ServiceMonitor looks in namespaces %v, not the Service's %s", names, svc.GetNamespace())
	}
	podSelector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	podLabels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
	if !labels.SelectorFromSet(podSelector).Matches(labels.Set(podLabels)) {
		t.Errorf("the Service selects %v, not the agent's Pods (%v)", podSelector, podLabels)
	}

	// Endpoint port → Service port → container port 8080, the agent's
	// --metrics-bind-address.
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(endpoints))
	}
	port, _ := endpoints[0].(map[string]any)["port"].(string)
	var target string
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, p := range ports {
		if p := p.(map[string]any); p["name"] == port {
			target, _ = p["targetPort"].(string)
		}
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	var containerPort any
	for _, c := range containers {
		cports, _ := c.(map[string]any)["ports"].([]any)
		for _, p := range cports {
			if p := p.(map[string]any); p["name"] == target {
				containerPort = p["containerPort"]
			}
		}
	}
	if fmt.Sprint(containerPort) != "8080" {
		t.Errorf("endpoint port %q → Service targetPort %q → container port %v, want 8080", port, target, containerPort)
	}

	// driftless install applies the same Service.
	manager, err := config.Manifests("manager")
	if err != nil {
		t.Fatal(err)
	}
	var embedded *unstructured.Unstructured
	for _, o := range manager {
		if o.GetKind() == "Service" && o.GetName() == svc.GetName() {
			embedded = o
		}
	}
	if embedded == nil {
		t.Fatal("driftless install does not apply the Service driftless-metrics")
	}
	if diff := cmp.Diff(svc.Object["spec"], embedded.Object["spec"]); diff != "" {
		t.Errorf("driftless install's Service differs from config/default's (-kustomize +install):\n%s", diff)
	}

	// The dashboard, for Grafana's sidecar.
	cm := only(t, monitoring, "ConfigMap", "driftless-dashboard")
	file, err := os.ReadFile("driftless-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "driftless-dashboard.json"); got != string(file) {
		t.Error("the ConfigMap driftless-dashboard does not hold driftless-dashboard.json")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap is labelled %v, without grafana_dashboard: \"1\"", cm.GetLabels())
	}
}
