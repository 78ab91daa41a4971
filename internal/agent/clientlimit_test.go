package agent_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
)

// limitOf is the client-side rate limit an agent of cfg chooses with
// --kube-api-qps qps and --kube-api-burst burst.
func limitOf(t *testing.T, cfg *rest.Config, qps float32, burst int) agent.ClientLimit {
	t.Helper()
	o := agenttest.Options(t, cfg, "driftless-system")
	o.QPS, o.Burst = qps, burst
	a, err := agent.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a.ClientLimit()
}

// By default the agent sets no client-side rate limit on an API server
// that applies API Priority and Fairness, which protects itself (a
// client-side limit made a first sync of 10,100 objects wait for itself
// two thirds of its time); it keeps 500 per second, burst 1,000, on one
// that does not, or that cannot say. A limit given by the flags is kept
// as given.
func TestTheAgentLimitsItsRequestsOnlyWhenTheAPIServerDoesNotProtectItself(t *testing.T) {
	if got := limitOf(t, env.Config, 0, 0); got.QPS >= 0 || !strings.Contains(got.Why, "applies priority and fairness") {
		t.Errorf("the default against an API server with priority and fairness: %s; want none", got)
	}
	if got := limitOf(t, env.Config, 50, 0); got.QPS != 50 || got.Burst != 100 || got.Why != "--kube-api-qps" {
		t.Errorf("--kube-api-qps 50: %s; want 50 requests/s, burst 100", got)
	}
	if got := limitOf(t, env.Config, 50, 60); got.QPS != 50 || got.Burst != 60 {
		t.Errorf("--kube-api-qps 50 --kube-api-burst 60: %s; want 50 requests/s, burst 60", got)
	}
	if got := limitOf(t, env.Config, -1, 0); got.QPS >= 0 {
		t.Errorf("--kube-api-qps -1: %s; want none", got)
	}

	// Credentials the API server refuses: it cannot say, so the limit.
	refused := rest.AnonymousClientConfig(env.Config)
	refused.BearerToken = "not-a-token"
	if got := limitOf(t, refused, 0, 0); got.QPS != 500 || got.Burst != 1000 || !strings.Contains(got.Why, "could not be asked") || !strings.Contains(got.Why, "401") {
		t.Errorf("the default when the API server refuses the agent's credentials: %s; want 500 requests/s, burst 1000, saying it could not ask (401)", got)
	}

	noAPF, err := testenv.StartWith(context.Background(), testenv.Options{NoPriorityAndFairness: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := noAPF.Stop(); err != nil {
			t.Error(err)
		}
	})
	if got := limitOf(t, noAPF.Config, 0, 0); got.QPS != 500 || got.Burst != 1000 || !strings.Contains(got.Why, "does not apply priority and fairness") {
		t.Errorf("the default against an API server without priority and fairness: %s; want 500 requests/s, burst 1000", got)
	}
	if got := limitOf(t, noAPF.Config, 0, 300); got.QPS != 500 || got.Burst != 300 {
		t.Errorf("--kube-api-burst 300 against an API server without priority and fairness: %s; want 500 requests/s, burst 300", got)
	}
}
