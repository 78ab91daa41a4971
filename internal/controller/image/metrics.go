package image

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// updates counts image update runs that did something, on the agent's
// metrics endpoint.
var updates = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "driftless_image_updates_total",
	Help: "Image update runs of a Sync that committed new tags (committed) or met a problem (failed), by Sync and result.",
}, []string{"sync", "result"})

func init() {
	metrics.Registry.MustRegister(updates)
}

// observeUpdate counts one image update run of sync: committed when it
// pushed a commit, failed when it met problems (both when it did both).
func observeUpdate(sync string, committed bool, problems int) {
	if committed {
		updates.WithLabelValues(sync, "committed").Inc()
	}
	if problems > 0 {
		updates.WithLabelValues(sync, "failed").Inc()
	}
}

// forgetUpdates removes the series of a Sync that is gone.
func forgetUpdates(sync string) {
	updates.DeletePartialMatch(prometheus.Labels{"sync": sync})
}
