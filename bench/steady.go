package main

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// steady is a quiet period: nothing changes in git or in the cluster.
type steady struct {
	Seconds   float64 `json:"seconds"`
	Intervals int     `json:"intervals"`
	// Syncs is how many Sync reconciles ran (one per interval expected).
	Syncs float64 `json:"sync_reconciles"`
	// Driftless is what the agent's transport counted; Server is the API
	// server's view of every client (the harness's own /metrics reads and
	// the API server's loopback client included).
	Driftless requestSummary `json:"driftless_requests"`
	Server    requestSummary `json:"server_requests"`
	// CPU is this process's CPU time: the agent plus the idle harness.
	// ChildCPU is the git processes the file:// transport starts.
	CPU      float64 `json:"cpu_s"`
	ChildCPU float64 `json:"git_child_cpu_s"`
}

// steady waits until the agent is quiet, then measures several intervals.
func (b *bench) steady(ctx context.Context, l *live, r *steady) error {
	if err := quiet(ctx, l.agent, 2*time.Second, time.Minute); err != nil {
		return err
	}
	r.Intervals = b.o.intervals
	reqBefore, _ := l.agent.requests.snapshot()
	srvBefore, err := serverRequests(ctx, b.env.Clientset)
	if err != nil {
		return err
	}
	syncsBefore := reconciles("sync")
	cpuBefore := readCPU()
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(b.o.intervals) * b.o.interval):
	}
	used := readCPU().minus(cpuBefore)
	r.Seconds = time.Since(start).Seconds()
	r.Syncs = reconciles("sync") - syncsBefore
	reqAfter, _ := l.agent.requests.snapshot()
	srvAfter, err := serverRequests(ctx, b.env.Clientset)
	if err != nil {
		return err
	}
	r.Driftless = summarize(reqAfter.minus(reqBefore))
	r.Server = summarize(srvAfter.minus(srvBefore))
	r.CPU, r.ChildCPU = used.self.Seconds(), used.children.Seconds()
	step("steady state, %d intervals: %d syncs, driftless requests: %s; CPU %.2f s (+ git %.2f s)",
		r.Intervals, int(r.Syncs), r.Driftless.ByVerb, r.CPU, r.ChildCPU)
	return nil
}

// quiet waits until the agent has issued no request for period.
func quiet(ctx context.Context, a *agent, period, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, _ := a.requests.snapshot()
	lastChange := time.Now()
	for time.Since(lastChange) < period {
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent was not quiet for %s within %s", period, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		now, _ := a.requests.snapshot()
		if now.total() != last.total() {
			last, lastChange = now, time.Now()
		}
	}
	return nil
}

// reconciles is controller-runtime's reconcile count of controller, over
// every agent this process ran.
func reconciles(controller string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
