package controller

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/drift"
)

// Prometheus metrics on the agent's metrics endpoint.
var (
	driftDetected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftless_drift_detected_total",
		Help: "Changes made in the cluster to managed objects, by Sync, kind and the field manager that made them.",
	}, []string{"sync", "kind", "manager"})
	driftReverted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftless_drift_reverted_total",
		Help: "Drifts put back to git, by Sync, kind and the field manager that had made them.",
	}, []string{"sync", "kind", "manager"})
	driftFights = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftless_drift_fights_total",
		Help: "Drifts left in place because the agent backs off from a fight with another writer, by Sync, kind and that writer's field manager.",
	}, []string{"sync", "kind", "manager"})
	driftRevertSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "driftless_drift_revert_seconds",
		Help:    "Time from a change in the cluster (its managedFields time, 1 s resolution) to its revert.",
		Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 10, 30, 60},
	})
	syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "driftless_sync_duration_seconds",
		Help:    "Duration of syncs that changed something or failed, by result, all Syncs together.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	}, []string{"result"})
	renders = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "driftless_renders_total",
		Help: "Renders of a Sync's paths: syncs that found their render in the cache do not count.",
	})
	kustomizeBuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftless_kustomize_builds_total",
		Help: "Kustomizations met in renders: built, or reused because none of their files changed.",
	}, []string{"result"})
	syncObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "driftless_sync_objects",
		Help: "Objects of the last sync, by action (created, configured, unchanged, pruned, skipped).",
	}, []string{"sync", "action"})
	syncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftless_sync_failures_total",
		Help: "Sync attempts that failed, by Sync and reason (the Ready condition's: FetchFailed, BuildFailed, ApplyFailed, …), each retry counted.",
	}, []string{"sync", "reason"})
)

func init() {
	metrics.Registry.MustRegister(driftDetected, driftReverted, driftFights, driftRevertSeconds, syncDuration, syncObjects, syncFailures,
		renders, kustomizeBuilds, syncStatus)
}

// observe records a drift incident of sync in the metrics.
func observe(sync string, action v1alpha1.DriftAction, kind string, fields []drift.FieldChange, now time.Time) {
	manager := managerNames.label(changedBy(fields))
	driftDetected.WithLabelValues(sync, kind, manager).Inc()
	if action == v1alpha1.DriftPaused {
		driftFights.WithLabelValues(sync, kind, manager).Inc()
	}
	if action != v1alpha1.DriftReverted {
		return
	}
	driftReverted.WithLabelValues(sync, kind, manager).Inc()
	var changed time.Time
	for _, f := range fields {
		if f.At.After(changed) {
			changed = f.At
		}
	}
	if !changed.IsZero() && now.After(changed) {
		driftRevertSeconds.Observe(now.Sub(changed).Seconds())
	}
}

// changedBy is the field manager of the newest change among fields, or
// "" when none names one (a deleted object, managedFields that do not
// say).
func changedBy(fields []drift.FieldChange) string {
	manager, at := "", time.Time{}
	for _, f := range fields {
		if f.Manager != "" && (manager == "" || f.At.After(at)) {
			manager, at = f.Manager, f.At
		}
	}
	return manager
}

// maxManagers bounds the distinct values of the manager label: any
// client names its own field manager, so a writer could otherwise add
// series without end.
const maxManagers = 32

// managerLabels hands out the manager label's values: the first
// maxManagers managers seen keep their name, later ones read "other",
// and "" reads "unknown".
type managerLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

var managerNames = &managerLabels{}

func (m *managerLabels) label(manager string) string {
	if manager == "" {
		return "unknown"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[manager] {
		return manager
	}
	if len(m.seen) >= maxManagers {
		return "other"
	}
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	m.seen[manager] = true
	return manager
}

// observeFailure counts a failed sync attempt of sync; a sync cut short
// by a newer revision did not fail.
func observeFailure(sync string, o outcome) {
	if o.err == nil || errors.Is(o.err, errSuperseded) {
		return
	}
	syncFailures.WithLabelValues(sync, o.reason).Inc()
}

// forgetSync removes the series of a Sync that is gone.
func forgetSync(sync string) {
	for _, v := range []*prometheus.MetricVec{driftDetected.MetricVec, driftReverted.MetricVec, driftFights.MetricVec,
		syncObjects.MetricVec, syncFailures.MetricVec} {
		v.DeletePartialMatch(prometheus.Labels{"sync": sync})
	}
}

// observeSync records a sync's duration and object counts. The duration
// histogram is one for all Syncs, as controller-runtime's reconcile time
// is one per controller: a histogram per Sync was 15 series a Sync, and
// every scrape built them all (16 MB at 2,500 Syncs).
func observeSync(sync string, o outcome) {
	result := "succeeded"
	if o.err != nil {
		result = "failed"
	}
	syncDuration.WithLabelValues(result).Observe(o.duration.Seconds())
	for _, a := range []apply.Action{apply.Created, apply.Configured, apply.Unchanged, apply.Pruned, apply.Skipped} {
		syncObjects.WithLabelValues(sync, strings.ToLower(string(a))).Set(float64(o.changes.Count(a)))
	}
}
