package cli

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
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
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	var err error
	c, err = client.New(e.Config, client.Options{Scheme: scheme})
	return err
}
