// Command localcluster starts, stops and inspects the detached local control
// plane used by the demo, with the parts that run workloads
// (kube-controller-manager, kube-scheduler and a kwok-simulated node). Run it
// through hack/local-cluster.sh.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/driftless/driftless/internal/testenv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: local-cluster.sh up|down|status")
		os.Exit(2)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		fatal(err)
	}
	dir := filepath.Join(root, ".local")
	if d := os.Getenv("DRIFTLESS_LOCAL_DIR"); d != "" {
		dir = d
	}
	binDir := testenv.DefaultBinDir()
	switch os.Args[1] {
	case "up":
		if st := testenv.StatusOf(dir, binDir); st.Up() {
			fmt.Printf("local cluster already up; kubeconfig: %s\n", filepath.Join(dir, "kubeconfig"))
			return
		}
		// Clear a half-started or crashed run before starting anew.
		if _, err := testenv.StopDetached(dir, binDir); err != nil {
			fatal(err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			fatal(err)
		}
		cp := &testenv.ControlPlane{Dir: dir, BinDir: binDir, Detach: true, Workloads: true}
		// The components outlive this process once up, but not an
		// interrupted start: a Ctrl-C or SIGTERM cancels it, and Start
		// stops what it had started.
		interrupted, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx, cancel := context.WithTimeout(interrupted, 3*time.Minute)
		defer cancel()
		if err := cp.Start(ctx); err != nil {
			if interrupted.Err() != nil {
				err = fmt.Errorf("interrupted: %w", err)
			}
			fatal(err)
		}
		fmt.Fprintf(os.Stderr, "local cluster up at %s (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with node %s; logs in %s)\n",
			cp.APIServerURL, testenv.SimulatedNodeName, dir)
		fmt.Println(cp.KubeconfigPath())
	case "down":
		stopped, err := testenv.StopDetached(dir, binDir)
		if err != nil {
			fatal(err)
		}
		if len(stopped) == 0 {
			fmt.Println("local cluster was not running")
			return
		}
		fmt.Printf("local cluster down (stopped %s)\n", strings.Join(stopped, ", "))
	case "status":
		st := testenv.StatusOf(dir, binDir)
		switch {
		case st.Up():
			fmt.Printf("up: %s running; kubeconfig: %s\n", strings.Join(st.Running, ", "), filepath.Join(dir, "kubeconfig"))
		case len(st.Running) > 0:
			fmt.Printf("degraded: only %s running (not %s); run `hack/local-cluster.sh down` then `up`\n",
				strings.Join(st.Running, ", "), strings.Join(st.NotRunning(), ", "))
			os.Exit(1)
		default:
			fmt.Println("down")
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q; usage: local-cluster.sh up|down|status\n", os.Args[1])
		os.Exit(2)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "local-cluster: %v\n", err)
	os.Exit(1)
}
