package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/receiver"
)

// fleet is many small Syncs of one repository: the shape of most fleets,
// and of Flux's public benchmark (1,000 Kustomizations of one
// GitRepository). Each Sync reads one app's file, four objects.
type fleet struct {
	Syncs   int `json:"syncs"`
	Objects int `json:"objects"`
	// AllReady is from creating the first Sync until every Sync was Ready
	// at the commit.
	AllReady float64 `json:"all_ready_s"`
	// Create is from creating the first Sync until the last was created,
	// 16 at a time as the sharded case does (one at a time until round 5:
	// at load ~20 the last was created 1.5 s before all were Ready, so
	// the loop, not the agent, was timed).
	Create float64 `json:"create_s"`
	// Floor is the validated floor (dry run, then apply, 32 at a time,
	// no client-side rate limit) over as many objects, timed on the same
	// control plane before the agent starts; PerFloor AllReady over it.
	// The API server bounds both, so the ratio moves less with the
	// machine's speed than AllReady does.
	Floor    float64 `json:"validated_floor_s"`
	PerFloor float64 `json:"all_ready_per_floor"`
	// Fetches and Trees are the agent's git fetches and the revisions it
	// wrote out, LsRemotes its resolutions of the branch; Renders its
	// renders of Syncs' paths.
	Fetches   int64          `json:"fetches"`
	Trees     int64          `json:"trees"`
	LsRemotes int64          `json:"ls_remotes"`
	Renders   float64        `json:"renders"`
	Requests  requestSummary `json:"driftless_requests"`
	// CPU is the CPU time from the first create until all Ready, in
	// seconds: kube-apiserver, etcd, and this process (the agent runs in
	// it, with the bench's creates and its polls of the Syncs), which load
	// on the machine does not move as it moves the time; APIServer per
	// request over every request the API server served then, and over
	// the validated floor's.
	CPU shardsCPU `json:"cpu_s"`
	// Memory is this process (agent and harness) after every Sync was
	// Ready; PeakRSS the highest RSS sampled while they synced.
	Memory  memory  `json:"memory"`
	PeakRSS float64 `json:"peak_rss_mib"`
	// Change is a commit to one app's file announced by a push notice,
	// which wakes every Sync of the repository.
	Change fleetChange `json:"change"`
}

// fleetChange is what a one-app commit cost the fleet.
type fleetChange struct {
	// Applied is from the push notice until the app's ConfigMap changed;
	// AllReady until every Sync was Ready at the commit.
	Applied   float64        `json:"push_to_applied_s"`
	AllReady  float64        `json:"push_to_all_ready_s"`
	Woken     int            `json:"woken"`
	Fetches   int64          `json:"fetches"`
	LsRemotes int64          `json:"ls_remotes"`
	Renders   float64        `json:"renders"`
	Writes    int            `json:"writes"`
	Requests  requestSummary `json:"driftless_requests"`
}

// runFleet measures syncs Syncs of one app each, on a control plane of
// its own.
func runFleet(ctx context.Context, o options, syncs int) (_ *fleet, err error) {
	b, stop, err := startBench(ctx, o, "fleet")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	env, dir := b.env, b.dir

	w := newWorkload("f", syncs)
	for _, ns := range w.namespaces {
		if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	repo, err := newGitRepo(filepath.Join(dir, "git"))
	if err != nil {
		return nil, err
	}
	rev, err := repo.commit("initial", w.files)
	if err != nil {
		return nil, err
	}
	r := &fleet{Syncs: syncs, Objects: 4 * syncs}
	step("the validated floor over as many objects, %d (dry run, then apply, 32 at a time)", r.Objects)
	floor, floorMS, err := b.timedFloor(ctx, fmt.Sprintf("fleet-%d-validated", syncs), newWorkload("v", syncs), r.Objects)
	if err != nil {
		return nil, err
	}
	r.Floor = floor.Seconds()
	step("validated floor: %.1f s", r.Floor)

	a, err := startAgent(ctx, env.Config, o.limits, o.concurrent, true, io.Discard)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, a.stop()) }()
	if err := a.waitForWorkers(ctx, b.admin, repo.url()); err != nil {
		return nil, err
	}

	step("creating %d Syncs of one app each", syncs)
	rendersBefore := rendersDone()
	reqBefore, _ := a.requests.snapshot()
	before, err := b.usageNow(ctx, nil)
	if err != nil {
		return nil, err
	}
	peak := sampleRSS()
	stopCPU, err := b.prof.cpu(fmt.Sprintf("cpu-fleet-%d", syncs))
	if err != nil {
		return nil, err
	}
	var sampler *wallSampler
	if o.profileDir != "" {
		sampler = startWallSampler(50 * time.Millisecond)
	}
	stopProfile := b.controlProfile(ctx, fmt.Sprintf("fleet-%d", syncs))
	defer func() { err = errors.Join(err, stopProfile()) }()
	start := time.Now()
	apps := make([]int, syncs)
	for i := range apps {
		apps[i] = i
	}
	if err := createAll(ctx, apps, func(ctx context.Context, i int) error {
		s := newSync(fleetSync(i), repo.url(), time.Hour, o.syncTimeout)
		s.Spec.Paths = []string{w.appFile(i)}
		return b.admin.Create(ctx, s)
	}); err != nil {
		return nil, err
	}
	r.Create = time.Since(start).Seconds()
	if err := watchAllReady(ctx, b.admin, syncs, rev, 15*time.Minute); err != nil {
		return nil, err
	}
	r.AllReady = time.Since(start).Seconds()
	r.PerFloor = r.AllReady / r.Floor
	stopCPU()
	after, err := b.usageNow(ctx, nil)
	if err != nil {
		return nil, err
	}
	if err := stopProfile(); err != nil {
		return nil, err
	}
	r.CPU, _ = after.since(before)
	r.CPU.FloorPerRequest = floorMS
	if sampler != nil {
		p := sampler.finish()
		b.printWallProfile(fmt.Sprintf("%d Syncs' first syncs", syncs), &p)
	}
	r.PeakRSS = peak()
	reqAfter, _ := a.requests.snapshot()
	r.Requests = summarize(reqAfter.minus(reqBefore))
	r.Renders = rendersDone() - rendersBefore
	stats := a.syncs.Mirror().Stats()
	r.Fetches, r.Trees, r.LsRemotes = stats.Fetches, stats.Trees, stats.Resolves
	r.Memory = readMemory()
	step("%d Syncs Ready in %.1f s (%.2f× the validated floor, %.1f s; the last created after %.1f s): %d fetches, %d ls-remotes, %.0f renders, %d requests (%s), peak RSS %.0f MiB",
		syncs, r.AllReady, r.PerFloor, r.Floor, r.Create, r.Fetches, r.LsRemotes, r.Renders, r.Requests.Total, r.Requests.ByVerb, r.PeakRSS)
	step("CPU until all Ready: kube-apiserver %.1f s (%.2f ms per request served; the floor's %.2f ms), etcd %.1f s, this process (agent and bench) %.1f s",
		r.CPU.APIServer, r.CPU.APIServerPerRequest, r.CPU.FloorPerRequest, r.CPU.Etcd, r.CPU.Bench)

	if err := quiet(ctx, a, 2*time.Second, 2*time.Minute); err != nil {
		return nil, err
	}
	if err := b.fleetChange(ctx, a, repo, w, &r.Change); err != nil {
		return nil, err
	}
	return r, nil
}

func fleetSync(i int) string { return fmt.Sprintf("app-%04d", i) }

// fleetChange commits a change to one app's ConfigMap, sends the push
// notice, and waits until every Sync is Ready at the commit.
func (b *bench) fleetChange(ctx context.Context, a *agent, repo *gitRepo, w *workload, r *fleetChange) error {
	const app = 7
	ns, name := w.namespaceOf(app), appName(app)
	rendersBefore := rendersDone()
	before := a.syncs.Mirror().Stats()
	reqBefore, _ := a.requests.snapshot()
	rev, err := repo.commit(name+": config v2", w.changed(app, "v2"))
	if err != nil {
		return err
	}
	var p githubPush
	p.Ref, p.After, p.HeadCommit.ID = "refs/heads/main", rev, rev
	p.Repository.FullName, p.Repository.CloneURL = "bench/fleet", repo.url()
	l := &live{agent: a, repo: repo}
	start := time.Now()
	reply, err := b.pushAll(ctx, l, p)
	if err != nil {
		return err
	}
	r.Woken = len(reply.Woken)
	applied := make(chan time.Duration, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) {
			var cm corev1.ConfigMap
			if err := b.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err == nil && cm.Data["CONFIG_VERSION"] == "v2" {
				applied <- time.Since(start)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		applied <- 0
	}()
	if err := watchAllReady(ctx, b.admin, w.apps, rev, 15*time.Minute); err != nil {
		return err
	}
	r.AllReady = time.Since(start).Seconds()
	r.Applied = (<-applied).Seconds()
	if err := quiet(ctx, a, time.Second, time.Minute); err != nil {
		return err
	}
	reqAfter, _ := a.requests.snapshot()
	reqs := reqAfter.minus(reqBefore)
	r.Requests, r.Writes = summarize(reqs), reqs.writes()
	r.Renders = rendersDone() - rendersBefore
	after := a.syncs.Mirror().Stats()
	r.Fetches, r.LsRemotes = after.Fetches-before.Fetches, after.Resolves-before.Resolves
	step("one app's commit, pushed: woke %d Syncs; applied in %.2f s, all Ready in %.2f s; %d fetches, %d ls-remotes, %.0f renders, %d writes (%s)",
		r.Woken, r.Applied, r.AllReady, r.Fetches, r.LsRemotes, r.Renders, r.Writes, r.Requests.ByVerb)
	return nil
}

// pushAll sends the push notice p to the agent's receiver and returns its
// reply, which lists the Syncs woken.
func (b *bench) pushAll(ctx context.Context, l *live, p githubPush) (receiver.Reply, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return receiver.Reply{}, err
	}
	code, reply, _, err := b.postHook(ctx, l.agent.hooks, "push", fmt.Sprintf("fleet-%d", time.Now().UnixNano()), body)
	if err != nil {
		return reply, err
	}
	if code != http.StatusOK {
		return reply, fmt.Errorf("the webhook receiver answered %d: %s", code, reply.Message)
	}
	return reply, nil
}

// allReady waits until n Syncs in the bench namespace are Ready at
// revision.
func allReady(ctx context.Context, c client.Client, n int, revision string) error {
	deadline := time.Now().Add(15 * time.Minute)
	for {
		var list v1alpha1.SyncList
		if err := c.List(ctx, &list, client.InNamespace(syncNamespace)); err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			s := &list.Items[i]
			if syncedAt(s, revision) {
				ready++
			} else if reason, failed := failed(s, revision); failed {
				return fmt.Errorf("sync %s failed: %s", s.Name, reason)
			}
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d Syncs Ready at %s after 15 minutes", ready, n, revision[:7])
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// rendersDone is the driftless_renders_total counter, over every agent
// this process ran.
func rendersDone() float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, f := range families {
		if f.GetName() == "driftless_renders_total" {
			total := 0.0
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	return 0
}

// sampleRSS samples this process's RSS every 100 ms until the returned
// function is called, which returns the highest sample.
func sampleRSS() func() float64 {
	stop := make(chan struct{})
	result := make(chan float64, 1)
	go func() {
		highest := rss()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				result <- max(highest, rss())
				return
			case <-t.C:
				highest = max(highest, rss())
			}
		}
	}()
	return func() float64 {
		close(stop)
		return <-result
	}
}
