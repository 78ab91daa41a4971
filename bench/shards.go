package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
)

// shardsRun is the sharded fleet (#30): Syncs of 10 objects each, all
// reading one repository, spread over agent processes by the
// driftless.dev/shard label, one process per shard on this machine.
type shardsRun struct {
	Shards  int `json:"shards"`
	Syncs   int `json:"syncs"`
	Objects int `json:"objects"`
	// AllReady is from creating the first Sync until every Sync was Ready
	// at the commit; Create the part of it the bench took to create the
	// Syncs (16 at a time, as a CI job or an operator's kubectl apply of
	// many files would).
	AllReady float64 `json:"all_ready_s"`
	Create   float64 `json:"create_s"`
	// Floor is the validated floor over the objects of FloorSyncs of the
	// Syncs (the same ten per Sync, in Namespaces of their own), run on
	// the same control plane just before the agents start: a dry run of
	// every object, then an apply of every object, 32 at a time, no
	// client-side rate limit. FloorAll is Floor scaled to every Sync's
	// objects (the floor is bound by the API server's throughput, so its
	// time grows with the objects), PerFloor AllReady over FloorAll. Zero
	// when not run (-shard-floor-syncs 0).
	FloorSyncs int     `json:"validated_floor_syncs,omitempty"`
	Floor      float64 `json:"validated_floor_s,omitempty"`
	FloorAll   float64 `json:"validated_floor_scaled_s,omitempty"`
	PerFloor   float64 `json:"all_ready_per_floor,omitempty"`
	// Requests is what the API server served from the first Sync created
	// until every Sync was Ready (apiserver_request_total: the agents, the
	// bench's creates and its watch of the Syncs), PerSync the same by
	// verb and resource divided by the Syncs.
	Requests requestSummary     `json:"server_requests"`
	PerSync  map[string]float64 `json:"server_requests_per_sync"`
	// CPU is the CPU time each part used over the same span, in seconds:
	// what bounds the time on a machine of few cores.
	CPU shardsCPU `json:"cpu_s"`
	// PeakMiB is the agents' VmHWM added up, once every Sync was Ready;
	// RSSMiB their VmRSS then.
	PeakMiB float64 `json:"peak_rss_mib"`
	RSSMiB  float64 `json:"rss_mib"`
	// PerShard is each agent's share.
	PerShard []shardAgent `json:"per_shard"`
}

// shardAgent is one shard's agent process.
type shardAgent struct {
	Shard   string  `json:"shard"`
	Syncs   int     `json:"syncs"`
	PeakMiB float64 `json:"peak_rss_mib"`
	RSSMiB  float64 `json:"rss_mib"`
	// Fetches is the process's git fetches (driftless_git_fetches_total)
	// for the one revision the Syncs read; LsRemotes its ls-remotes
	// (driftless_source_resolves_total): each Sync's first sync waits for
	// one that started after it asked, shared with the Syncs that ask
	// meanwhile.
	Fetches   float64 `json:"fetches"`
	LsRemotes float64 `json:"ls_remotes"`
}

// shardsCPU is CPU time in seconds, by process.
type shardsCPU struct {
	// Agents is the agent processes'; absent when the agent runs in the
	// bench's process (the fleet case), where Bench counts it.
	Agents    float64 `json:"agents,omitempty"`
	APIServer float64 `json:"kube_apiserver"`
	Etcd      float64 `json:"etcd"`
	// Bench is this process: the creates, the watch of the Syncs, and
	// the agent when it runs here.
	Bench float64 `json:"bench"`
	// APIServerPerRequest is APIServer over the requests it served, in
	// milliseconds; FloorPerRequest the same for the validated floor's
	// requests (a dry run and an apply of each object).
	APIServerPerRequest float64 `json:"kube_apiserver_ms_per_request"`
	FloorPerRequest     float64 `json:"floor_kube_apiserver_ms_per_request,omitempty"`
}

// runShards measures syncs Syncs of 10 objects over shards agent
// processes of the binary bin, on a control plane of its own.
func runShards(ctx context.Context, o options, bin string, syncs, shards int) (_ *shardsRun, err error) {
	b, stop, err := startBench(ctx, o, "shards")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()

	files := map[string]string{}
	var namespaces []string
	paths := make([]string, syncs)
	floor := &workload{files: map[string]string{}}
	floorSyncs := min(o.shardFloorSyncs, syncs)
	for i := range syncs {
		ns := fmt.Sprintf("s-%03d", i/appsPerNamespace)
		if i%appsPerNamespace == 0 {
			namespaces = append(namespaces, ns)
			if i < floorSyncs {
				namespaces = append(namespaces, "floor-"+ns)
			}
		}
		paths[i] = fmt.Sprintf("syncs/%s/s-%05d.yaml", ns, i)
		files[paths[i]] = tenObjects(ns, i)
		if i < floorSyncs {
			floor.files[paths[i]] = tenObjects("floor-"+ns, i)
		}
	}
	if err := createAll(ctx, namespaces, func(ctx context.Context, ns string) error {
		return b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}); err != nil {
		return nil, err
	}
	repo, err := newGitRepo(filepath.Join(b.dir, "git"))
	if err != nil {
		return nil, err
	}
	rev, err := repo.commit("initial", files)
	if err != nil {
		return nil, err
	}
	r := &shardsRun{Shards: shards, Syncs: syncs, Objects: 10 * syncs}
	floorCPU := 0.0
	if floorSyncs > 0 {
		step("the validated floor over %d Syncs' objects, %d (dry run, then apply, 32 at a time)", floorSyncs, 10*floorSyncs)
		d, perRequest, err := b.timedFloor(ctx, fmt.Sprintf("shards-%d-validated", syncs), floor, 10*floorSyncs)
		if err != nil {
			return nil, err
		}
		floorCPU = perRequest
		r.FloorSyncs, r.Floor = floorSyncs, d.Seconds()
		r.FloorAll = r.Floor * float64(syncs) / float64(floorSyncs)
		step("validated floor: %.1f s; over every Sync's objects, scaled: %.1f s", r.Floor, r.FloorAll)
	}
	procs := make([]*agentProcess, shards)
	for k := range shards {
		dir := filepath.Join(b.dir, fmt.Sprintf("shard-%d", k+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p, err := startAgentProcess(bin, b.env, dir, "--shard=shard-"+fmt.Sprint(k+1))
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, p.stop()) }()
		procs[k] = p
		r.PerShard = append(r.PerShard, shardAgent{Shard: fmt.Sprintf("shard-%d", k+1)})
	}
	for _, p := range procs {
		if err := p.quiet(ctx, quietFor, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	step("%d agent processes idle; creating %d Syncs of 10 objects, %d objects", shards, syncs, r.Objects)
	before, err := b.usageNow(ctx, procs)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	names := make([]int, syncs)
	for i := range syncs {
		names[i] = i
		r.PerShard[i%shards].Syncs++
	}
	if err := createAll(ctx, names, func(ctx context.Context, i int) error {
		s := newSync(fmt.Sprintf("sh-%05d", i), repo.url(), time.Hour, o.syncTimeout)
		s.Spec.Paths = []string{paths[i]}
		s.Labels = map[string]string{v1alpha1.ShardLabel: r.PerShard[i%shards].Shard}
		return b.admin.Create(ctx, s)
	}); err != nil {
		return nil, err
	}
	r.Create = time.Since(start).Seconds()
	step("%d Syncs created in %.1f s", syncs, r.Create)
	if err := watchAllReady(ctx, b.admin, syncs, rev, 30*time.Minute); err != nil {
		var exited error
		for _, p := range procs {
			exited = errors.Join(exited, p.exited())
		}
		return nil, errors.Join(err, exited)
	}
	r.AllReady = time.Since(start).Seconds()
	if r.FloorAll > 0 {
		r.PerFloor = r.AllReady / r.FloorAll
	}
	after, err := b.usageNow(ctx, procs)
	if err != nil {
		return nil, err
	}
	var reqs requestCounts
	r.CPU, reqs = after.since(before)
	r.CPU.FloorPerRequest = floorCPU
	r.Requests = summarize(reqs)
	r.PerSync = map[string]float64{}
	for k, v := range reqs {
		r.PerSync[k.Verb+" "+k.Resource] = float64(v) / float64(syncs)
	}
	for k, p := range procs {
		a := &r.PerShard[k]
		if a.PeakMiB, err = p.status("VmHWM"); err != nil {
			return nil, err
		}
		if a.RSSMiB, err = p.status("VmRSS"); err != nil {
			return nil, err
		}
		if a.Fetches, err = p.metric(ctx, "driftless_git_fetches_total"); err != nil {
			return nil, err
		}
		if a.LsRemotes, err = p.metric(ctx, "driftless_source_resolves_total"); err != nil {
			return nil, err
		}
		r.PeakMiB += a.PeakMiB
		r.RSSMiB += a.RSSMiB
	}
	step("%d Syncs over %d shards Ready in %.1f s (%.2f× the validated floor, %.1f s; creating them took %.1f s); agents' RSS together: peak %.0f MiB, now %.0f MiB; per shard: %+v",
		syncs, shards, r.AllReady, r.PerFloor, r.FloorAll, r.Create, r.PeakMiB, r.RSSMiB, r.PerShard)
	step("the API server served %d requests (%.1f per Sync: %s); CPU: agents %.0f s, kube-apiserver %.0f s (%.2f ms per request; the floor's %.2f ms), etcd %.0f s, bench %.0f s",
		r.Requests.Total, float64(r.Requests.Total)/float64(syncs), r.Requests.Detail, r.CPU.Agents, r.CPU.APIServer, r.CPU.APIServerPerRequest, r.CPU.FloorPerRequest, r.CPU.Etcd, r.CPU.Bench)
	return r, nil
}

// shardsCPU reads the CPU time so far of the agent processes, the control
// plane's kube-apiserver and etcd, and this process.
func (b *bench) shardsCPU(procs []*agentProcess) (shardsCPU, error) {
	var c shardsCPU
	for _, p := range procs {
		s, err := p.cpu()
		if err != nil {
			return c, err
		}
		c.Agents += s
	}
	for name, into := range map[string]*float64{"kube-apiserver": &c.APIServer, "etcd": &c.Etcd} {
		data, err := os.ReadFile(filepath.Join(b.env.ControlPlane.Dir, name+".pid"))
		if err != nil {
			return c, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return c, fmt.Errorf("%s.pid: %w", name, err)
		}
		if *into, err = cpuSeconds(pid); err != nil {
			return c, err
		}
	}
	c.Bench = readCPU().self.Seconds()
	return c, nil
}

// usage is what the control plane and the agents had used at one moment:
// CPU seconds by process and the requests the API server had served.
type usage struct {
	cpu    shardsCPU
	served requestCounts
}

// usageNow reads it (procs: the agent processes, nil when the agent runs
// in this process).
func (b *bench) usageNow(ctx context.Context, procs []*agentProcess) (usage, error) {
	cpu, err := b.shardsCPU(procs)
	if err != nil {
		return usage{}, err
	}
	served, err := serverRequests(ctx, b.env.Clientset)
	return usage{cpu: cpu, served: served}, err
}

// since returns the CPU used and the requests served from before to u,
// with the API server's CPU per request.
func (u usage) since(before usage) (shardsCPU, requestCounts) {
	served := u.served.minus(before.served)
	c := shardsCPU{
		Agents:    u.cpu.Agents - before.cpu.Agents,
		APIServer: u.cpu.APIServer - before.cpu.APIServer,
		Etcd:      u.cpu.Etcd - before.cpu.Etcd,
		Bench:     u.cpu.Bench - before.cpu.Bench,
	}
	if n := served.total(); n > 0 {
		c.APIServerPerRequest = 1000 * c.APIServer / float64(n)
	}
	return c, served
}

// timedFloor runs the validated floor over w's objects (a dry run, then
// an apply, 32 at a time) and returns its time and the API server's CPU
// per request, in milliseconds, over its 2*objects requests; with
// -apiserver-profile, the control plane's profiles over it are named name.
func (b *bench) timedFloor(ctx context.Context, name string, w *workload, objects int) (time.Duration, float64, error) {
	before, err := b.shardsCPU(nil)
	if err != nil {
		return 0, 0, err
	}
	stopProfile := b.controlProfile(ctx, name)
	d, err := floorApply(ctx, b.env.Config, w, 32, true)
	if err != nil {
		return 0, 0, errors.Join(fmt.Errorf("validated floor: %w", err), stopProfile())
	}
	after, err := b.shardsCPU(nil)
	if err := errors.Join(err, stopProfile()); err != nil {
		return 0, 0, err
	}
	return d, 1000 * (after.APIServer - before.APIServer) / float64(2*objects), nil
}

// createAll calls create for each item, 16 at a time, and returns the
// first error.
func createAll[T any](ctx context.Context, items []T, create func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, it := range items {
		g.Go(func() error { return create(gctx, it) })
	}
	return g.Wait()
}

// watchAllReady waits until n Syncs in the bench namespace are Ready at
// revision, or one failed there, or limit passed. It lists the Syncs once
// and then follows a watch (listing again if the watch ends), where
// allReady lists every Syncs each 200 ms: at 10,000 Syncs such a LIST is
// tens of megabytes the API server reads from etcd and encodes, work
// that would count against the agents.
func watchAllReady(ctx context.Context, c client.WithWatch, n int, revision string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	ready := map[string]bool{}
	count := func() int {
		k := 0
		for _, r := range ready {
			if r {
				k++
			}
		}
		return k
	}
	see := func(s *v1alpha1.Sync) error {
		ready[s.Name] = syncedAt(s, revision)
		if reason, failed := failed(s, revision); failed {
			return fmt.Errorf("sync %s failed: %s", s.Name, reason)
		}
		return nil
	}
	for {
		var list v1alpha1.SyncList
		if err := c.List(ctx, &list, client.InNamespace(syncNamespace)); err != nil {
			return fmt.Errorf("%d of %d Syncs Ready at %.7s: %w", count(), n, revision, err)
		}
		clear(ready)
		for i := range list.Items {
			if err := see(&list.Items[i]); err != nil {
				return err
			}
		}
		if count() >= n {
			return nil
		}
		w, err := c.Watch(ctx, &v1alpha1.SyncList{}, client.InNamespace(syncNamespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			return fmt.Errorf("%d of %d Syncs Ready at %.7s: %w", count(), n, revision, err)
		}
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*v1alpha1.Sync)
			if !ok {
				break // an error event: list again
			}
			if ev.Type == watch.Deleted {
				delete(ready, s.Name)
				continue
			}
			if err := see(s); err != nil {
				w.Stop()
				return err
			}
			if count() >= n {
				w.Stop()
				return nil
			}
		}
		w.Stop()
	}
}
