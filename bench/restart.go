package main

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/api/v1alpha1"
)

// restart is a new agent started over objects already in sync: what it
// writes and how long until it serves.
type restart struct {
	// Serving is from starting the agent (building its manager, what
	// `driftless agent` does after reading its flags) to serving: its cache
	// synced, a drift watch listed for every kind of the workload, a Sync
	// reconcile finished without error since the start, and the Sync Ready
	// at the revision it was Ready at before. Polled every 5 ms.
	Serving float64 `json:"serving_s"`
	// CacheSynced is from the start to the manager's cache synced (the
	// Sync informer and what controllers registered up front).
	CacheSynced float64 `json:"cache_synced_s"`
	// List is one full LIST of the Sync's objects, one request per kind,
	// one after the other, with a client of the agent's rate limits and
	// label selector: the time the agent's serving is compared to.
	List  timing  `json:"list_s"`
	Ratio float64 `json:"serving_over_list"`
	// Requests are the new agent's requests until serving; Settled adds
	// those until it was quiet for 2 s after.
	Requests requestSummary `json:"driftless_requests_until_serving"`
	Settled  requestSummary `json:"driftless_requests_until_quiet"`
	// ManagedWrites are writes (not GET, LIST, WATCH or dry runs) to the
	// workload's kinds until quiet: the target is 0. OtherWrites are the
	// other writes (the Sync, its status, Events, Leases) apart.
	ManagedWrites int    `json:"managed_object_writes"`
	OtherWrites   int    `json:"other_writes"`
	OtherDetail   string `json:"other_writes_detail"`
}

// workloadKinds are the kinds the workload is made of.
var workloadKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Service"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
}

// restart stops the kept agent and starts a new one over the same cluster,
// every object already in sync, then times a full LIST of the Sync's
// objects for comparison. The new agent replaces the kept one in l.
func (b *bench) restart(ctx context.Context, l *live, r *restart) error {
	if err := quiet(ctx, l.agent, time.Second, time.Minute); err != nil {
		return err
	}
	if err := l.agent.stop(); err != nil {
		return fmt.Errorf("stop the agent: %w", err)
	}
	var s v1alpha1.Sync
	if err := b.admin.Get(ctx, client.ObjectKey{Namespace: syncNamespace, Name: l.sync}, &s); err != nil {
		return err
	}
	if !syncedAt(&s, l.revision) {
		return fmt.Errorf("the Sync %s was not Ready at %.7s before the restart", l.sync, l.revision)
	}
	syncsBefore := reconcileResults("sync")
	start := time.Now()
	a, err := startAgent(ctx, b.env.Config, b.o.limits, b.o.concurrent, false, io.Discard)
	if err != nil {
		return fmt.Errorf("start a new agent: %w", err)
	}
	l.agent = a
	r.CacheSynced = time.Since(start).Seconds()
	deadline := time.Now().Add(5 * time.Minute)
	for !b.serving(ctx, a, l, syncsBefore) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the restarted agent was not serving the Sync %s within 5 minutes", l.sync)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.Serving = time.Since(start).Seconds()
	// The install's requests (CRDs, namespace) are not the restart's.
	untilServing, _ := a.requests.snapshot()
	untilServing = untilServing.minus(a.installed)
	r.Requests = summarize(untilServing)
	if err := quiet(ctx, a, 2*time.Second, time.Minute); err != nil {
		return err
	}
	settled, _ := a.requests.snapshot()
	settled = settled.minus(a.installed)
	r.Settled = summarize(settled)
	managed := map[string]bool{}
	for _, gvr := range resources {
		managed[gvr.Resource] = true
	}
	other := requestCounts{}
	for k, n := range settled {
		switch {
		case !isWrite(k.Verb):
		case managed[k.Resource]:
			r.ManagedWrites += n
		default:
			other[k] += n
		}
	}
	r.OtherWrites, r.OtherDetail = other.total(), other.detailed()

	if err := b.timeList(ctx, l, &r.List); err != nil {
		return err
	}
	r.Ratio = r.Serving / r.List.Median
	step("restart over %d objects in sync: serving after %.2f s (cache synced %.2f s) = %.1f× one full LIST (%.3f s); %d writes to managed objects, %d others (%s); requests until serving: %s",
		l.work.objects(), r.Serving, r.CacheSynced, r.Ratio, r.List.Median, r.ManagedWrites, r.OtherWrites, r.OtherDetail, r.Requests.ByVerb)
	return nil
}

// serving reports whether the restarted agent serves the Sync: its drift
// watches cover every kind, the Sync controller finished a reconcile
// without error since the start, and the Sync is Ready at the revision.
func (b *bench) serving(ctx context.Context, a *agent, l *live, before map[string]float64) bool {
	done := reconcileResults("sync")
	finished := 0.0
	for result, n := range done {
		if result != "error" {
			finished += n - before[result]
		}
	}
	if finished < 1 || !a.syncs.Watches.Covers(workloadKinds) {
		return false
	}
	var s v1alpha1.Sync
	if err := b.admin.Get(ctx, client.ObjectKey{Namespace: syncNamespace, Name: l.sync}, &s); err != nil {
		return false
	}
	return syncedAt(&s, l.revision)
}

// timeList times one LIST per kind of the Sync's objects, one after the
// other, three times, with a client of the agent's rate limits.
func (b *bench) timeList(ctx context.Context, l *live, t *timing) error {
	cfg := rest.CopyConfig(b.env.Config)
	cfg.QPS, cfg.Burst = b.o.limits.qps, b.o.limits.burst
	if b.o.limits.unthrottle {
		cfg.QPS, cfg.Burst = -1, 0
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	selector := v1alpha1.SyncLabel + "=" + v1alpha1.SyncLabelValue(syncNamespace, l.sync)
	for range 3 {
		start := time.Now()
		n := 0
		for _, gvk := range workloadKinds {
			list, err := dyn.Resource(resources[gvk.Kind]).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return fmt.Errorf("list %s: %w", gvk.Kind, err)
			}
			n += len(list.Items)
		}
		t.add(time.Since(start))
		if n != l.work.objects() {
			return fmt.Errorf("listed %d objects of the Sync %s, want %d", n, l.sync, l.work.objects())
		}
	}
	return nil
}

// reconcileResults is controller-runtime's reconcile count of controller
// by result (success, error, requeue, requeue_after), over every agent
// this process ran.
func reconcileResults(controller string) map[string]float64 {
	out := map[string]float64{}
	families, err := metrics.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var name, result string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "controller":
					name = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			if name == controller {
				out[result] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}
