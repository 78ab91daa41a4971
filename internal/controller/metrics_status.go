package controller

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/driftless/driftless/api/v1alpha1"
)

// syncStatus reports every Sync's Ready condition as the metric
// driftless_sync_ready, read from the manager's cache at each scrape: the
// metric says what the Sync's status says, Syncs that are gone have no
// series, and a reconcile has nothing to keep up to date.
var syncStatus = &statusCollector{readers: map[*client.Reader]struct{}{}}

var syncReadyDesc = prometheus.NewDesc("driftless_sync_ready",
	"1 when the Sync's Ready condition is True, 0 otherwise (False, Unknown, or not written yet), "+
		"with the condition's status and reason and whether the Sync is suspended; one series per Sync.",
	[]string{"sync", "status", "reason", "suspended"}, nil)

// statusCollector is a prometheus.Collector over the Syncs of every
// running agent of the process (one in production; tests run several).
type statusCollector struct {
	mu      sync.Mutex
	readers map[*client.Reader]struct{}
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- syncReadyDesc }

// Collect lists the Syncs of each reader; a Sync two readers hold is
// reported once. A reader that cannot list adds nothing.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	readers := make([]client.Reader, 0, len(c.readers))
	for r := range c.readers {
		readers = append(readers, *r)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for _, r := range readers {
		var list v1alpha1.SyncList
		if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			continue
		}
		for i := range list.Items {
			s := &list.Items[i]
			key := s.Namespace + "/" + s.Name
			if seen[key] {
				continue
			}
			seen[key] = true
			status, reason, suspended := readyLabels(s)
			value := 0.0
			if status == string(metav1.ConditionTrue) {
				value = 1
			}
			ch <- prometheus.MustNewConstMetric(syncReadyDesc, prometheus.GaugeValue, value, key, status, reason, suspended)
		}
	}
}

// readyLabels are the labels of a Sync's driftless_sync_ready series: its
// Ready condition's status and reason (Unknown and "" before the agent
// wrote one) and "true" or "false" for spec.suspend.
func readyLabels(s *v1alpha1.Sync) (status, reason, suspended string) {
	status, suspended = string(metav1.ConditionUnknown), "false"
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		status, reason = string(c.Status), c.Reason
	}
	if s.Spec.Suspend {
		suspended = "true"
	}
	return status, reason, suspended
}

// reportStatus is a manager Runnable that adds the manager's cache to
// syncStatus while the manager runs and is the leader, so that only the
// agent that syncs reports.
func reportStatus(reader client.Reader) manager.RunnableFunc {
	return func(ctx context.Context) error {
		r := &reader
		syncStatus.mu.Lock()
		syncStatus.readers[r] = struct{}{}
		syncStatus.mu.Unlock()
		<-ctx.Done()
		syncStatus.mu.Lock()
		delete(syncStatus.readers, r)
		syncStatus.mu.Unlock()
		return nil
	}
}
