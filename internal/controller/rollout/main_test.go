// Package rollout tests the Sync controller against a control plane where
// rollouts really happen: kube-controller-manager, kube-scheduler and a
// kwok-simulated node (testenv.MainWithWorkloads). It is a package of its
// own so that the other controller tests keep the cheaper control plane.
package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	crds "github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env *testenv.Env
	c   client.Client
)

func TestMain(m *testing.M) { testenv.MainWithWorkloads(m, &env, setup) }

func setup(e *testenv.Env) error {
	ctrl.SetLogger(logr.Discard())
	var err error
	if c, err = client.New(e.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	defs, err := crds.SyncCRDs()
	if err != nil {
		return err
	}
	return e.InstallCRDs(context.Background(), defs...)
}

// startAgent runs the agent (agenttest), in namespace, until the test
// ends: a Sync in namespace acts as the agent.
func startAgent(t *testing.T, namespace string) {
	t.Helper()
	agenttest.Start(t, agenttest.Options(t, env.Config, namespace))
}

// eventually polls cond until it returns true or the deadline passes,
// then fails with the last thing cond said.
func eventually(t *testing.T, what string, deadline time.Duration, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, deadline, what, func() string {
		if ok, msg := cond(); !ok {
			return "not yet: " + msg
		}
		return ""
	})
}
