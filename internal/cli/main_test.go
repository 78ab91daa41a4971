package cli

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/testenv"
)

var (
	env *testenv.Env
	// c reads and writes as a user would; it knows Syncs, whose CRD the
	// agent under test installs.
	c client.Client
)

func TestMain(m *testing.M) { testenv.MainWith(m, &env, setup) }

func setup(e *testenv.Env) error {
	scheme := testenv.Scheme()
	var err error
	c, err = client.New(e.Config, client.Options{Scheme: scheme})
	return err
}
