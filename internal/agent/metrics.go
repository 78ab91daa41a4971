package agent

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/internal/source"
)

// The git fetches of the agent's mirror, as driftless_git_fetches_total:
// the bench reads it from each shard's process (one fetch per shard and
// revision). A process that runs several agents (a test binary) counts
// the latest one's.
var (
	fetchesOnce   sync.Once
	fetchesMirror atomic.Pointer[source.Mirror]
)

func exportFetches(m *source.Mirror) {
	fetchesMirror.Store(m)
	fetchesOnce.Do(func() {
		metrics.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "driftless_git_fetches_total",
			Help: "Git fetches from remotes by the agent's mirror (one per repository, credentials and new revision).",
		}, func() float64 {
			if m := fetchesMirror.Load(); m != nil {
				return float64(m.Stats().Fetches)
			}
			return 0
		}))
	})
}
