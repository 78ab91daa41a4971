package controller

import (
	"strings"
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
		Help: "Changes made in the cluster to managed objects, by kind.",
	}, []string{"kind"})
	driftReverted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driftless_drift_reverted_total",
		Help: "Drifts put back to git, by kind.",
	}, []string{"kind"})
	driftRevertSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "driftless_drift_revert_seconds",
		Help:    "Time from a change in the cluster (its managedFields time, 1 s resolution) to its revert.",
		Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 10, 30, 60},
	})
	syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "driftless_sync_duration_seconds",
		Help:    "Duration of syncs that changed something or failed, by result.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	}, []string{"sync", "result"})
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
)

func init() {
	metrics.Registry.MustRegister(driftDetected, driftReverted, driftRevertSeconds, syncDuration, syncObjects, renders, kustomizeBuilds)
}

// observe records a drift incident in the metrics.
func observe(action v1alpha1.DriftAction, kind string, fields []drift.FieldChange, now time.Time) {
	driftDetected.WithLabelValues(kind).Inc()
	if action != v1alpha1.DriftReverted {
		return
	}
	driftReverted.WithLabelValues(kind).Inc()
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

// observeSync records a sync's duration and object counts.
func observeSync(sync string, o outcome) {
	result := "succeeded"
	if o.err != nil {
		result = "failed"
	}
	syncDuration.WithLabelValues(sync, result).Observe(o.duration.Seconds())
	for _, a := range []apply.Action{apply.Created, apply.Configured, apply.Unchanged, apply.Pruned, apply.Skipped} {
		syncObjects.WithLabelValues(sync, strings.ToLower(string(a))).Set(float64(o.changes.Count(a)))
	}
}
