package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/driftless/driftless/internal/testenv"
)

// kubectl runs bin/k8s/kubectl against the control plane, with a discovery
// cache of its own that warm() fills, as an operator's would be.
type kubectl struct {
	bin, kubeconfig, cacheDir string
}

func newKubectl(env *testenv.Env, dir string) *kubectl {
	return &kubectl{
		bin:        filepath.Join(env.ControlPlane.BinDir, "kubectl"),
		kubeconfig: env.ControlPlane.KubeconfigPath(),
		cacheDir:   filepath.Join(dir, "kubectl-cache"),
	}
}

func (k *kubectl) run(ctx context.Context, args ...string) error {
	args = append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := testenv.StartTied(cmd) // a bench that is killed takes its kubectl with it
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		tail := out.Bytes()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("kubectl %v: %w\n%s", args, err, tail)
	}
	return nil
}

// warm fills the discovery cache.
func (k *kubectl) warm(ctx context.Context) error { return k.run(ctx, "api-resources", "-o", "name") }

// apply writes the workload's files under dir and times
// `kubectl apply --server-side -R -f dir`.
func (k *kubectl) apply(ctx context.Context, w *workload, dir string) (time.Duration, error) {
	for name, content := range w.files {
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := k.run(ctx, "apply", "--server-side", "--field-manager=bench-kubectl", "-R", "-f", dir); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
