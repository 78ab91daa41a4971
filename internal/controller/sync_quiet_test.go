package controller

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// A fleet of Syncs reads one repository: a commit to one app's directory
// must not make every other Sync render again, nor send an event. The status still records
// the revision, and a commit that does change the Sync's objects is told.
func TestACommitThatChangesNoneOfASyncsObjectsIsRecordedWithoutAnEvent(t *testing.T) {
	h := newHarness(t)
	cm := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  v: \"" + v + "\"\n"
	}
	h.repo.Commit(t, "web v1", map[string]string{"web/cm.yaml": cm("1"), "other/cm.yaml": strings.ReplaceAll(cm("1"), "web", "other")})
	h.createSync("web", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"web"} })
	h.expectReady(h.reconcile("web"))

	untouched := h.repo.Commit(t, "other v2", map[string]string{"other/cm.yaml": strings.ReplaceAll(cm("2"), "web", "other")})
	before := rendersSoFar(t)
	s := h.reconcile("web")
	h.expectReady(s)
	if got := rendersSoFar(t) - before; got != 0 {
		t.Errorf("a commit outside the Sync's paths was rendered again (%v renders)", got)
	}
	if s.Status.LastAppliedRevision != untouched {
		t.Fatalf("lastAppliedRevision = %s, want the new commit %s", source.Short(s.Status.LastAppliedRevision), source.Short(untouched))
	}

	changed := h.repo.Commit(t, "web v2", map[string]string{"web/cm.yaml": cm("2")})
	h.expectReady(h.reconcile("web"))
	if got := get(t, "v1", "ConfigMap", h.ns, "web"); got == nil || got.Object["data"].(map[string]any)["v"] != "2" {
		t.Errorf("the commit to the Sync's paths was not applied: %v", got)
	}
	// Events are sent in order: once the last one is there, the one for
	// the untouched commit would be too.
	notes := eventsFor(t, h.ns, "web", "applied "+source.Short(changed))
	for _, n := range notes {
		if strings.Contains(n, source.Short(untouched)) {
			t.Errorf("an event was sent for a commit that changed none of the Sync's objects: %q", n)
		}
	}
}

func rendersSoFar(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := renders.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A render is reused for a commit outside the Sync's paths only when it
// read nothing outside them: a chart that rendered nothing still read its
// values file from elsewhere in the repository.
func TestAChartThatRenderedNothingIsRenderedAgainWhenItsValuesChange(t *testing.T) {
	h := newHarness(t)
	chart := func(enabled string) map[string]string {
		return map[string]string{
			"apps/cm.yaml":                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n",
			"apps/chart.yaml":              "apiVersion: driftless.dev/v1alpha1\nkind: HelmChart\nmetadata: {name: opt}\nspec:\n  chart: {path: charts/opt}\n  valuesFiles: [values/opt.yaml]\n",
			"charts/opt/Chart.yaml":        "apiVersion: v2\nname: opt\nversion: 1.0.0\n",
			"charts/opt/templates/cm.yaml": "{{ if .Values.enabled }}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: optional\n{{ end }}\n",
			"values/opt.yaml":              "enabled: " + enabled + "\n",
		}
	}
	h.repo.Commit(t, "chart off", chart("false"))
	h.createSync("opt", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"apps"} })
	h.expectReady(h.reconcile("opt"))
	if get(t, "v1", "ConfigMap", h.ns, "optional") != nil {
		t.Fatal("the chart rendered its ConfigMap while disabled")
	}
	h.repo.Commit(t, "chart on", map[string]string{"values/opt.yaml": "enabled: true\n"})
	h.expectReady(h.reconcile("opt"))
	if get(t, "v1", "ConfigMap", h.ns, "optional") == nil {
		t.Error("a change to the chart's values file outside the Sync's paths was not applied: the empty render was reused")
	}
}
