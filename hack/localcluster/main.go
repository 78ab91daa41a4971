// Command localcluster starts, stops and inspects the detached local control
// plane used by the demo, with the parts that run workloads
// (kube-controller-manager, kube-scheduler and a kwok-simulated node) and a
// pod runner that runs the Pods of the driftless image as local processes
// (testenv.PodRunner). Run it through hack/local-cluster.sh.
package main

import (
	"context"
	"errors"
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
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	switch os.Args[1] {
	case "run-pods":
		// Started by up, detached; stopped by down (SIGTERM).
		if err := runPods(dir); err != nil {
			fatal(err)
		}
	case "up":
		if st := testenv.StatusOf(dir, binDir); st.Up() {
			// A cluster started before the pod runner existed gets one.
			if !testenv.DetachedProcessRunning(dir, podRunnerName, self) {
				if err := startPodRunner(dir, self); err != nil {
					fatal(err)
				}
			}
			fmt.Printf("local cluster already up; kubeconfig: %s\n", filepath.Join(dir, "kubeconfig"))
			return
		}
		// Clear a half-started or crashed run before starting anew.
		if _, err := testenv.StopDetachedProcess(dir, podRunnerName, self); err != nil {
			fatal(err)
		}
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
		if err := startPodRunner(dir, self); err != nil {
			_, _ = testenv.StopDetachedProcess(dir, podRunnerName, self)
			fatal(errors.Join(err, cp.Stop()))
		}
		fmt.Fprintf(os.Stderr, "local cluster up at %s (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok with node %s, and a pod runner for image %s; logs in %s)\n",
			cp.APIServerURL, testenv.SimulatedNodeName, testenv.DriftlessImage, dir)
		fmt.Println(cp.KubeconfigPath())
	case "down":
		// The pod runner first: it stops the processes it runs.
		runner, err := testenv.StopDetachedProcess(dir, podRunnerName, self)
		if err != nil {
			fatal(err)
		}
		stopped, err := testenv.StopDetached(dir, binDir)
		if err != nil {
			fatal(err)
		}
		if runner {
			stopped = append([]string{podRunnerName}, stopped...)
		}
		if len(stopped) == 0 {
			fmt.Println("local cluster was not running")
			return
		}
		fmt.Printf("local cluster down (stopped %s)\n", strings.Join(stopped, ", "))
	case "status":
		st := testenv.StatusOf(dir, binDir)
		switch {
		case st.Up() && testenv.DetachedProcessRunning(dir, podRunnerName, self):
			fmt.Printf("up: %s running; kubeconfig: %s\n", strings.Join(append(st.Running, podRunnerName), ", "), filepath.Join(dir, "kubeconfig"))
		case st.Up():
			fmt.Printf("degraded: only %s running (not %s); run `hack/local-cluster.sh down` then `up`\n", strings.Join(st.Running, ", "), podRunnerName)
			os.Exit(1)
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

// podRunnerName names the pod runner's pid and log files in the cluster's
// directory.
const podRunnerName = "podrunner"

// startPodRunner builds cmd/driftless into dir/bin and starts this
// program's run-pods detached.
func startPodRunner(dir, self string) error {
	if _, err := testenv.BuildDriftless(filepath.Join(dir, "bin")); err != nil {
		return err
	}
	return testenv.StartDetachedProcess(dir, podRunnerName, self, []string{"DRIFTLESS_LOCAL_DIR=" + dir}, "run-pods")
}

// runPods runs the pod runner of the cluster in dir until SIGTERM or
// SIGINT: Pods of the driftless image run dir/bin/driftless, logging to
// dir/pods/.
func runPods(dir string) error {
	cp := &testenv.ControlPlane{Dir: dir}
	cfg, err := cp.RESTConfig()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &testenv.PodRunner{Config: cfg, Images: map[string]string{testenv.DriftlessImage: filepath.Join(dir, "bin", "driftless")}, Dir: filepath.Join(dir, "pods")}
	fmt.Fprintf(os.Stderr, "pod runner: running the Pods of image %s on node %s with %s; logs in %s\n", testenv.DriftlessImage, testenv.SimulatedNodeName, filepath.Join(dir, "bin", "driftless"), r.Dir)
	return r.Run(ctx)
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "local-cluster: %v\n", err)
	os.Exit(1)
}
