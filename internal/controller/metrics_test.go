package controller

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/drift"
)

// gather is every metric family the agent's registry serves.
func gather(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// metricValue is the value of the series of name with exactly labels on
// the agent's registry (what its /metrics serves), and whether it exists.
func metricValue(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families := gather(t)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

// exposedSeries counts the series /metrics serves whose sync label is
// sync, over every metric: a histogram serves one per bucket, +Inf, _sum
// and _count.
func exposedSeries(t *testing.T, sync string) int {
	t.Helper()
	families := gather(t)
	n := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if !hasLabel(m, "sync", sync) {
				continue
			}
			n++
			if h := m.GetHistogram(); h != nil {
				n += len(h.GetBucket()) + 2
			}
		}
	}
	return n
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// syncsObserved is the count of driftless_sync_duration_seconds with
// result succeeded: the agent's syncs that were recorded, all Syncs
// together.
func syncsObserved(t *testing.T) uint64 {
	t.Helper()
	families := gather(t)
	for _, f := range families {
		if f.GetName() != "driftless_sync_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, map[string]string{"result": "succeeded"}) {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// seriesOf counts the series of name whose sync label is sync.
func seriesOf(t *testing.T, name, sync string) int {
	t.Helper()
	families := gather(t)
	n := 0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sync" && l.GetValue() == sync {
					n++
				}
			}
		}
	}
	return n
}

func TestMetricsSayWhichSyncsAreReadyWhatFailedAndWhoDrifted(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "initial", map[string]string{"app.yaml": deployment(h.ns, "web", "512Mi")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	h.createSync("broken", func(s *v1alpha1.Sync) {
		s.Spec.Source.Git.URL = "file://" + filepath.Join(t.TempDir(), "missing.git")
	})
	startAgent(t, false)
	h.waitReady("fleet", rev)
	fleet, broken := h.ns+"/fleet", h.ns+"/broken"

	eventually(t, "driftless_sync_ready 1 for the Ready Sync", func() bool {
		v, ok := metricValue(t, "driftless_sync_ready", map[string]string{"sync": fleet, "status": "True", "reason": v1alpha1.ReasonSucceeded, "suspended": "false"})
		return ok && v == 1
	})
	eventually(t, "driftless_sync_ready 0 with reason FetchFailed for the Sync whose repository is missing", func() bool {
		v, ok := metricValue(t, "driftless_sync_ready", map[string]string{"sync": broken, "status": "False", "reason": v1alpha1.ReasonFetchFailed, "suspended": "false"})
		return ok && v == 0
	})
	if v, _ := metricValue(t, "driftless_sync_failures_total", map[string]string{"sync": broken, "reason": v1alpha1.ReasonFetchFailed}); v < 1 {
		t.Errorf("driftless_sync_failures_total{reason=FetchFailed} = %v for %s, want at least 1", v, broken)
	}
	if n := seriesOf(t, "driftless_sync_failures_total", fleet); n != 0 {
		t.Errorf("%d failure series for the Sync that never failed", n)
	}
	// A Sync costs a scrape its Ready gauge and its 5 object counts; the
	// sync durations are one histogram by result for all Syncs (a
	// histogram per Sync was 15 series more, 2,500 Syncs 37,500).
	if n := exposedSeries(t, fleet); n > 6 {
		t.Errorf("/metrics serves %d series labelled with the Ready Sync, want at most 6 (driftless_sync_ready, driftless_sync_objects by action)", n)
	}
	if n := syncsObserved(t); n < 1 {
		t.Errorf("driftless_sync_duration_seconds{result=succeeded} counted %d syncs, want the first sync of %s", n, fleet)
	}

	// A hand edit is counted against its Sync, kind and writer.
	edit(t, h.ns, "web", "1Gi", nil)
	eventually(t, "driftless_drift_reverted_total counting kubectl-edit's change", func() bool {
		v, _ := metricValue(t, "driftless_drift_reverted_total", map[string]string{"sync": fleet, "kind": "Deployment", "manager": "kubectl-edit"})
		return v == 1
	})
	if v, _ := metricValue(t, "driftless_drift_detected_total", map[string]string{"sync": fleet, "kind": "Deployment", "manager": "kubectl-edit"}); v != 1 {
		t.Errorf("driftless_drift_detected_total = %v, want 1", v)
	}

	// Suspended, the Sync says so; deleted, it has no series left.
	h.setSpec("fleet", func(s *v1alpha1.Sync) { s.Spec.Suspend = true })
	eventually(t, "driftless_sync_ready saying suspended", func() bool {
		_, ok := metricValue(t, "driftless_sync_ready", map[string]string{"sync": fleet, "status": "True", "reason": v1alpha1.ReasonSucceeded, "suspended": "true"})
		return ok
	})
	if err := c.Delete(context.Background(), h.syncNow("broken")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no series left for the deleted Sync", func() bool {
		return seriesOf(t, "driftless_sync_ready", broken)+seriesOf(t, "driftless_sync_failures_total", broken) == 0
	})
}

func TestManagerLabelIsBounded(t *testing.T) {
	m := &managerLabels{}
	for i := range maxManagers {
		if got := m.label(string(rune('a' + i))); got != string(rune('a'+i)) {
			t.Fatalf("manager %d labelled %q", i, got)
		}
	}
	if got := m.label("one-too-many"); got != "other" {
		t.Errorf("manager past the bound labelled %q, want other", got)
	}
	if got := m.label("a"); got != "a" {
		t.Errorf("a manager seen before labelled %q, want a", got)
	}
	if got := m.label(""); got != "unknown" {
		t.Errorf("no manager labelled %q, want unknown", got)
	}
}

func TestChangedByIsTheNewestChangesManager(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	fields := []drift.FieldChange{
		{Path: "a", Manager: "helm", At: t0},
		{Path: "b", Manager: "kubectl-edit", At: t0.Add(time.Minute)},
		{Path: "c"},
	}
	if got := changedBy(fields); got != "kubectl-edit" {
		t.Errorf("changedBy = %q, want kubectl-edit", got)
	}
	if got := changedBy(nil); got != "" {
		t.Errorf("changedBy(nil) = %q, want empty", got)
	}
}
