package agent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/driftless/driftless/internal/controller"
)

// ClientLimit is the client-side rate limit of the agent's API clients,
// shared by all of them (a client per kind, per impersonated tenant, the
// manager's cache): one budget for the agent, as --kube-api-qps says.
type ClientLimit struct {
	// QPS is requests per second; negative: no client-side limit.
	QPS   float32
	Burst int
	// Why says how it was chosen, for the log.
	Why string
}

func (l ClientLimit) String() string {
	if l.QPS < 0 {
		return "none (" + l.Why + ")"
	}
	return fmt.Sprintf("%g requests/s, burst %d (%s)", l.QPS, l.Burst, l.Why)
}

// apfProbeTimeout bounds the request that asks the API server whether it
// applies priority and fairness.
const apfProbeTimeout = 10 * time.Second

// chooseClientLimit turns --kube-api-qps and --kube-api-burst into the
// limit. A positive QPS is kept as given (Burst 0: twice QPS); a negative
// one turns the limit off. QPS 0, the default, asks the API server: one
// that applies API Priority and Fairness (every Kubernetes since 1.20
// unless turned off; it names the FlowSchema that matched in each
// answer) protects itself, and a client-side limit would only make a
// large sync wait for itself, so there is none, as SIG API Machinery
// recommends and Flux and controller-runtime do. An API server that
// does not, or that cannot be asked, gets controller.DefaultKubeAPIQPS.
func chooseClientLimit(ctx context.Context, cfg *rest.Config, qps float32, burst int) ClientLimit {
	switch {
	case qps < 0:
		return ClientLimit{QPS: -1, Why: "--kube-api-qps is negative"}
	case qps > 0:
		if burst <= 0 {
			burst = int(2 * qps)
		}
		return ClientLimit{QPS: qps, Burst: max(burst, 1), Why: "--kube-api-qps"}
	}
	fallback := ClientLimit{QPS: controller.DefaultKubeAPIQPS, Burst: controller.DefaultKubeAPIBurst}
	if burst > 0 {
		fallback.Burst = burst
	}
	apf, err := appliesPriorityAndFairness(ctx, cfg)
	switch {
	case err != nil:
		fallback.Why = fmt.Sprintf("the API server could not be asked whether it applies priority and fairness: %v", err)
		return fallback
	case !apf:
		fallback.Why = "the API server does not apply priority and fairness"
		return fallback
	}
	return ClientLimit{QPS: -1, Why: "the API server applies priority and fairness"}
}

// appliesPriorityAndFairness asks the API server of cfg whether it
// classifies requests by API Priority and Fairness: its answers then name
// the FlowSchema that matched, even an answer that refuses the request.
func appliesPriorityAndFairness(ctx context.Context, cfg *rest.Config) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, apfProbeTimeout)
	defer cancel()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, err
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.JoinPath("livez", "ping").String(), nil)
	if err != nil {
		return false, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return false, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		// Refused before priority and fairness classifies anything.
		return false, fmt.Errorf("GET /livez/ping: %s", resp.Status)
	}
	return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "", nil
}

// apply sets l on cfg: one token bucket for every client made from cfg
// (client-go makes one per client and kind when cfg has none).
func (l ClientLimit) apply(cfg *rest.Config) {
	if l.QPS < 0 {
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
		return
	}
	cfg.QPS, cfg.Burst = l.QPS, l.Burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(l.QPS, l.Burst)
}
