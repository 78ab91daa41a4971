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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/driftless/driftless/api/v1alpha1"
	crds "github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/controller"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env    *testenv.Env
	scheme = runtime.NewScheme()
	c      client.Client
)

func TestMain(m *testing.M) { testenv.MainWithWorkloads(m, &env, setup) }

func setup(e *testenv.Env) error {
	ctrl.SetLogger(logr.Discard())
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	var err error
	if c, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	defs, err := crds.SyncCRDs()
	if err != nil {
		return err
	}
	return e.InstallCRDs(context.Background(), defs...)
}

// startAgent runs the controllers as the agent does until the test ends.
func startAgent(t *testing.T) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     scheme,
		Cache:      controller.CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := controller.DefaultOptions()
	opts.CacheDir = t.TempDir()
	if _, err := controller.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// eventually polls cond until it returns true or the deadline passes,
// then fails with the last thing cond said.
func eventually(t *testing.T, what string, deadline time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	last := ""
	for time.Now().Before(end) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}
