package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// firstSync compares the contenders on a first sync of the same workload,
// each into namespaces of its own.
type firstSync struct {
	// FloorSweep is the floor's time (s) at each concurrency tried.
	FloorSweep       map[string]float64 `json:"floor_sweep_s"`
	FloorConcurrency int                `json:"floor_concurrency"`
	Floor            timing             `json:"floor_s"`
	// Validated is the floor with a dry-run of every object before its
	// batch is applied: the least a validate-first design can cost.
	Validated      timing  `json:"floor_validated_s"`
	ValidatedRatio float64 `json:"floor_validated_over_floor"`
	Kubectl        timing  `json:"kubectl_s"`
	// Driftless is from creating the Sync to Ready, with the agent's own
	// client settings; Engine is the sync's own duration from its status.
	Driftless   timing  `json:"driftless_s"`
	Engine      timing  `json:"driftless_engine_s"`
	Unthrottled *timing `json:"driftless_unthrottled_s,omitempty"`
	// Failed says how driftless's first sync failed, when it did; it is
	// then not repeated and Driftless has no samples.
	Failed string `json:"driftless_failed,omitempty"`
	// KeptLimits are the client limits of the agent kept for the later
	// phases: the timed agent's, unless that one failed.
	KeptLimits string  `json:"later_phases_client_limits"`
	Ratio      float64 `json:"driftless_over_floor"`
	// UnthrottledRatio is Unthrottled over the floor.
	UnthrottledRatio float64 `json:"driftless_unthrottled_over_floor,omitempty"`
	KubectlRatio     float64 `json:"kubectl_over_floor"`
	// Requests are the API server's counts for the last run of each
	// contender; DriftlessOwn is what the agent's transport counted.
	Requests     map[string]requestSummary `json:"server_requests"`
	DriftlessOwn requestSummary            `json:"driftless_requests"`
	// InFlight is the mean number of driftless requests in flight during
	// its first sync: time in flight summed over requests / wall time. The
	// apply stage runs 8 at a time.
	InFlight            float64 `json:"driftless_mean_in_flight"`
	UnthrottledInFlight float64 `json:"driftless_unthrottled_mean_in_flight,omitempty"`
	AgentCPU            float64 `json:"driftless_cpu_s"`
	// APIServerCPU and EtcdCPU are the control plane's CPU time over the
	// last driftless first sync, and ValidatedAPIServerCPU the API
	// server's over the last validated floor: counts the load of other
	// processes moves less than times.
	APIServerCPU          float64 `json:"driftless_apiserver_cpu_s"`
	EtcdCPU               float64 `json:"driftless_etcd_cpu_s"`
	ValidatedAPIServerCPU float64 `json:"floor_validated_apiserver_cpu_s"`
	// ValidatedEtcdCPU and ValidatedClientCPU are etcd's and the floor's
	// own (this process's) CPU over the last validated floor: with
	// AgentCPU, what the two contenders cost the machine's cores.
	ValidatedEtcdCPU   float64 `json:"floor_validated_etcd_cpu_s"`
	ValidatedClientCPU float64 `json:"floor_validated_client_cpu_s"`
	// Latency is the time in flight of driftless's requests by verb and
	// status code, over its whole first sync.
	Latency            map[string]string `json:"driftless_request_latency"`
	UnthrottledLatency map[string]string `json:"driftless_unthrottled_request_latency,omitempty"`
	WallProfile        *wallProfile      `json:"driftless_wall_profile,omitempty"`
	UnthrottledProfile *wallProfile      `json:"driftless_unthrottled_wall_profile,omitempty"`
}

// firstSync runs the contenders: the floor at each concurrency once, then
// repetitions of floor (at the best concurrency), kubectl, driftless
// without client-side limit and driftless as shipped, interleaved so that
// a noisy neighbour or a growing etcd hits all alike. The last driftless
// agent is kept for the later phases.
func (b *bench) firstSync(ctx context.Context, r *firstSync, mem *memResult) (*live, error) {
	r.FloorSweep = map[string]float64{}
	r.Requests = map[string]requestSummary{}
	best, bestTime := 0, time.Duration(0)
	for _, c := range b.o.concurrencies {
		d, srv, err := b.serverCounted(ctx, fmt.Sprintf("floor-%d-c%d", b.size, c), func() (time.Duration, error) {
			return floorApply(ctx, b.env.Config, newWorkload(fmt.Sprintf("f%d", c), b.apps), c, false)
		})
		if err != nil {
			return nil, err
		}
		step("floor, concurrency %d: %.2f s", c, d.Seconds())
		r.FloorSweep[strconv.Itoa(c)] = d.Seconds()
		if best == 0 || d < bestTime {
			best, bestTime = c, d
			r.Floor = timing{}
			r.Floor.add(d)
			r.Requests["floor"] = summarize(srv)
		}
	}
	r.FloorConcurrency = best

	var live *live
	for rep := 1; rep <= b.o.repeats; rep++ {
		if rep > 1 {
			d, srv, err := b.serverCounted(ctx, fmt.Sprintf("floor-%d-%d", b.size, rep), func() (time.Duration, error) {
				return floorApply(ctx, b.env.Config, newWorkload(fmt.Sprintf("f%dr%d", best, rep), b.apps), best, false)
			})
			if err != nil {
				return nil, err
			}
			step("floor, concurrency %d: %.2f s", best, d.Seconds())
			r.Floor.add(d)
			r.Requests["floor"] = summarize(srv)
		}
		d, srv, err := b.serverCounted(ctx, fmt.Sprintf("validated-%d-%d", b.size, rep), func() (time.Duration, error) {
			// The CPU read right around the floor, as around driftless's
			// sync: not the request counts' reads of /metrics, nor the
			// profile's last second.
			before, err := b.shardsCPU(nil)
			if err != nil {
				return 0, err
			}
			self := readCPU()
			d, err := floorApply(ctx, b.env.Config, newWorkload(fmt.Sprintf("v%d", rep), b.apps), best, true)
			r.ValidatedClientCPU = readCPU().minus(self).self.Seconds()
			if after, cerr := b.shardsCPU(nil); cerr == nil {
				r.ValidatedAPIServerCPU, r.ValidatedEtcdCPU = after.APIServer-before.APIServer, after.Etcd-before.Etcd
			}
			return d, err
		})
		if err != nil {
			return nil, err
		}
		step("floor with a dry-run of everything first, concurrency %d: %.2f s (CPU: this process %.2f s, kube-apiserver %.2f s, etcd %.2f s)",
			best, d.Seconds(), r.ValidatedClientCPU, r.ValidatedAPIServerCPU, r.ValidatedEtcdCPU)
		r.Validated.add(d)
		r.Requests["floor-validated"] = summarize(srv)

		if rep <= b.o.kubectlRepeats {
			prefix := fmt.Sprintf("k%d", rep)
			d, srv, err := b.serverCounted(ctx, fmt.Sprintf("kubectl-%d-%d", b.size, rep), func() (time.Duration, error) {
				return b.kubectl.apply(ctx, newWorkload(prefix, b.apps), filepath.Join(b.dir, "kubectl-"+prefix))
			})
			if err != nil {
				return nil, err
			}
			step("kubectl apply --server-side: %.2f s", d.Seconds())
			r.Kubectl.add(d)
			r.Requests["kubectl"] = summarize(srv)
		}

		if rep <= b.o.unthrottledRepeats {
			run, _, err := b.driftlessFirstSync(ctx, fmt.Sprintf("u%d", rep), unthrottled, false, mem)
			if err != nil {
				return nil, fmt.Errorf("driftless %s: %w", unthrottled.name, err)
			}
			step("driftless, %s: %.2f s", unthrottled.name, run.wall.Seconds())
			if r.Unthrottled == nil {
				r.Unthrottled = &timing{}
			}
			r.Unthrottled.add(run.wall)
			r.Requests["driftless-unthrottled"] = summarize(run.server)
			r.UnthrottledInFlight = run.busy.Seconds() / run.wall.Seconds()
			r.UnthrottledLatency = run.latency
			if run.wallProfile != nil {
				r.UnthrottledProfile = run.wallProfile
				b.printWallProfile("first sync, driftless, "+unthrottled.name, run.wallProfile)
			}
		}

		if r.Failed != "" {
			continue // it fails the same way every time
		}
		keep := rep == b.o.repeats
		run, l, err := b.driftlessFirstSync(ctx, fmt.Sprintf("d%d", rep), b.o.limits, keep, mem)
		if err != nil {
			return nil, fmt.Errorf("driftless %s: %w", b.o.limits.name, err)
		}
		if run.failed != nil {
			r.Failed = fmt.Sprintf("failed after %s: %s", secs(run.wall.Seconds()), run.failed.short())
			step("driftless, %s: %s; not repeated", b.o.limits.name, r.Failed)
		} else {
			step("driftless, %s: %.2f s (engine %.2f s; CPU: this process %.2f s, kube-apiserver %.2f s, etcd %.2f s)", b.o.limits.name,
				run.wall.Seconds(), run.engine.Seconds(), run.cpu.self.Seconds(), run.control.APIServer, run.control.Etcd)
			r.Driftless.add(run.wall)
			r.Engine.add(run.engine)
		}
		r.Requests["driftless"] = summarize(run.server)
		r.DriftlessOwn = summarize(run.requests)
		r.InFlight = run.busy.Seconds() / run.wall.Seconds()
		r.AgentCPU = run.cpu.self.Seconds()
		r.APIServerCPU, r.EtcdCPU = run.control.APIServer, run.control.Etcd
		r.Latency = run.latency
		if run.wallProfile != nil {
			r.WallProfile = run.wallProfile
			b.printWallProfile("first sync, driftless, "+b.o.limits.name, run.wallProfile)
		}
		live = l
	}
	r.KeptLimits = b.o.limits.name
	if live == nil {
		// The agent as configured cannot finish a first sync at this size:
		// the later phases run on one without the client-side limit.
		r.KeptLimits = unthrottled.name
		run, l, err := b.driftlessFirstSync(ctx, "dk", unthrottled, true, mem)
		if err != nil {
			return nil, err
		}
		if run.failed != nil {
			return nil, fmt.Errorf("driftless %s: %w", unthrottled.name, run.failed)
		}
		step("driftless, %s, for the later phases: %.2f s", unthrottled.name, run.wall.Seconds())
		live = l
	}
	if r.Failed == "" {
		r.Ratio = r.Driftless.Median / r.Floor.Median
	}
	r.KubectlRatio = r.Kubectl.Median / r.Floor.Median
	r.ValidatedRatio = r.Validated.Median / r.Floor.Median
	if r.Unthrottled != nil {
		r.UnthrottledRatio = r.Unthrottled.Median / r.Floor.Median
	}
	return live, nil
}

// serverCounted runs f and returns its result with the API server's
// request counts over it; with -apiserver-profile, the control plane's
// CPU profiles over it are named name (controlProfile).
func (b *bench) serverCounted(ctx context.Context, name string, f func() (time.Duration, error)) (time.Duration, requestCounts, error) {
	before, err := serverRequests(ctx, b.env.Clientset)
	if err != nil {
		return 0, nil, err
	}
	stopProfile := b.controlProfile(ctx, name)
	d, err := f()
	if err := errors.Join(err, stopProfile()); err != nil {
		return 0, nil, err
	}
	after, err := serverRequests(ctx, b.env.Clientset)
	if err != nil {
		return 0, nil, err
	}
	return d, after.minus(before), nil
}

// printWallProfile shows a wall-time breakdown.
func (b *bench) printWallProfile(title string, p *wallProfile) {
	step("wall-time profile, %s (%d samples every %d ms):", title, p.Samples, p.PeriodMS)
	for _, line := range p.lines() {
		fmt.Fprintln(os.Stderr, "    "+line)
	}
}
