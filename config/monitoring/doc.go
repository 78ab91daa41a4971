// Package monitoring holds the agent's monitoring manifests, not code: a
// Grafana dashboard (driftless-dashboard.json), Prometheus alert rules
// (alerts.yaml, and the same rules as a PrometheusRule), a ServiceMonitor,
// and a kustomization that installs them (docs/monitoring.md). Its tests
// check that every metric they name is one the agent registers, and run
// the rules' unit tests (tests/) with promtool.
package monitoring
