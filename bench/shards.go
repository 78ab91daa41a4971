package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// at the commit.
	AllReady float64 `json:"all_ready_s"`
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
	// for the one revision the Syncs read.
	Fetches float64 `json:"fetches"`
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
	for i := range syncs {
		ns := fmt.Sprintf("s-%03d", i/appsPerNamespace)
		if i%appsPerNamespace == 0 {
			namespaces = append(namespaces, ns)
		}
		paths[i] = fmt.Sprintf("syncs/%s/s-%05d.yaml", ns, i)
		files[paths[i]] = tenObjects(ns, i)
	}
	for _, ns := range namespaces {
		if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
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
	start := time.Now()
	for i := range syncs {
		s := newSync(fmt.Sprintf("sh-%05d", i), repo.url(), time.Hour, o.syncTimeout)
		s.Spec.Paths = []string{paths[i]}
		s.Labels = map[string]string{v1alpha1.ShardLabel: r.PerShard[i%shards].Shard}
		r.PerShard[i%shards].Syncs++
		if err := b.admin.Create(ctx, s); err != nil {
			return nil, err
		}
	}
	if err := allReady(ctx, b.admin, syncs, rev); err != nil {
		var exited error
		for _, p := range procs {
			exited = errors.Join(exited, p.exited())
		}
		return nil, errors.Join(err, exited)
	}
	r.AllReady = time.Since(start).Seconds()
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
		r.PeakMiB += a.PeakMiB
		r.RSSMiB += a.RSSMiB
	}
	step("%d Syncs over %d shards Ready in %.1f s; agents' RSS together: peak %.0f MiB, now %.0f MiB; per shard: %+v",
		syncs, shards, r.AllReady, r.PeakMiB, r.RSSMiB, r.PerShard)
	return r, nil
}
