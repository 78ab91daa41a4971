package receiver

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// requests counts webhook requests by endpoint and result, on the agent's
// metrics endpoint.
var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "driftless_webhook_requests_total",
	Help: "Webhook requests by endpoint (provider: github, gitlab, gitea, bitbucket, generic, unknown) and result: " +
		"woken, no_match, ignored, pong, replayed, unauthenticated, no_secret, too_large, rate_limited, bad_request, " +
		"not_leader, unavailable, not_found, method_not_allowed.",
}, []string{"provider", "result"})

func init() {
	metrics.Registry.MustRegister(requests)
}
