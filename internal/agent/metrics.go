package agent

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/internal/source"
)

// The git fetches and the resolutions (ls-remotes) of the agent's mirror,
// as driftless_git_fetches_total and driftless_source_resolves_total: the
// bench reads them from each shard's process (one fetch per shard and
// revision; the ls-remotes are what a git host sees of the Syncs' first
// syncs and intervals). A process that runs several agents (a test binary)
// counts the latest one's.
var (
	fetchesOnce   sync.Once
	fetchesMirror atomic.Pointer[source.Mirror]
)

func exportFetches(m *source.Mirror) {
	fetchesMirror.Store(m)
	fetchesOnce.Do(func() {
		stat := func(of func(source.MirrorStats) int64) func() float64 {
			return func() float64 {
				if m := fetchesMirror.Load(); m != nil {
					return float64(of(m.Stats()))
				}
				return 0
			}
		}
		metrics.Registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "driftless_git_fetches_total",
				Help: "Git fetches from remotes by the agent's mirror (one per repository, credentials and new revision).",
			}, stat(func(s source.MirrorStats) int64 { return s.Fetches })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "driftless_source_resolves_total",
				Help: "Resolutions of a Sync's branch, tag or range to a revision by the agent's mirror: git ls-remotes (shared by the Syncs that ask for one ref of one repository at the same time) and OCI tag lookups.",
			}, stat(func(s source.MirrorStats) int64 { return s.Resolves })),
		)
	})
}
