package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Env is a running control plane with ready-made clients.
type Env struct {
	ControlPlane *ControlPlane
	Config       *rest.Config
	Client       client.Client
	Clientset    kubernetes.Interface
}

// Start launches a control plane in a fresh temporary directory.
func Start(ctx context.Context) (*Env, error) {
	dir, err := os.MkdirTemp("", "driftless-controlplane-")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, BinDir: DefaultBinDir()}
	if err := cp.Start(ctx); err != nil {
		return nil, err
	}
	cfg, err := cp.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("%w (stop: %v)", err, cp.Stop())
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w (stop: %v)", err, cp.Stop())
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w (stop: %v)", err, cp.Stop())
	}
	return &Env{ControlPlane: cp, Config: cfg, Client: c, Clientset: cs}, nil
}

// Stop stops the control plane and removes its directory.
func (e *Env) Stop() error {
	err := e.ControlPlane.Stop()
	if err == nil {
		err = os.RemoveAll(e.ControlPlane.Dir)
	}
	return err
}

// Main is a TestMain body: it starts a control plane into *env, runs the
// package's tests and stops it. A control plane that fails to start fails
// the whole package with the reason.
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
func Main(m *testing.M, env **Env) { MainWith(m, env, nil) }

// MainWith is Main with a setup step, such as installing CRDs, run once
// the control plane is up and before the tests.
func MainWith(m *testing.M, env **Env, setup func(*Env) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: control plane did not start: %v\n", err)
		os.Exit(1)
	}
	if setup != nil {
		if err := setup(e); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: setup: %v\n", err)
			_ = e.Stop()
			os.Exit(1)
		}
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop control plane: %v\n", err)
	}
	os.Exit(code)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test and deletes it
// when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	name := fmt.Sprintf("%s-%04x", base, rand.IntN(0x10000))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return name
}
