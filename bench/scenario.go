package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/testenv"
)

// sizeResult is everything measured at one size.
type sizeResult struct {
	Objects    int       `json:"objects"`
	Apps       int       `json:"apps"`
	Namespaces int       `json:"namespaces"`
	FirstSync  firstSync `json:"first_sync"`
	Change     change    `json:"change"`
	Steady     steady    `json:"steady"`
	Drift      drift     `json:"drift"`
	Memory     memResult `json:"memory"`
	// Restart is nil with -restart=false.
	Restart *restart `json:"restart,omitempty"`
}

// requestSummary is a requestCounts in JSON.
type requestSummary struct {
	Total  int    `json:"total"`
	Writes int    `json:"writes"`
	ByVerb string `json:"by_verb"`
	Detail string `json:"detail"`
}

func summarize(c requestCounts) requestSummary {
	return requestSummary{Total: c.total(), Writes: c.writes(), ByVerb: c.String(), Detail: c.detailed()}
}

// bench is one size's control plane and clients.
type bench struct {
	o       options
	size    int
	apps    int
	env     *testenv.Env
	admin   client.WithWatch
	dynamic dynamic.Interface
	kubectl *kubectl
	dir     string
	prof    profiler
	// hookSecret is the webhook Secret's github key, which the bench signs
	// its push notices with.
	hookSecret []byte
}

// startBench starts a control plane of its own for one case, with the
// Sync CRD and namespace installed; stop stops it and removes its files.
func startBench(ctx context.Context, o options, name string) (b *bench, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "driftless-bench-"+name+"-")
	if err != nil {
		return nil, nil, err
	}
	step("starting a control plane")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	env, err := testenv.StartWith(startCtx, testenv.Options{Profiling: o.apiserverProfileDir != ""})
	cancel()
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	stop = func() error { return errors.Join(env.Stop(), os.RemoveAll(dir)) }
	b = &bench{o: o, env: env, dir: dir, prof: profiler{dir: o.profileDir}}
	if b.admin, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme}); err == nil {
		b.dynamic, err = dynamic.NewForConfig(env.Config)
	}
	if err == nil {
		err = b.install(ctx)
	}
	if err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	return b, stop, nil
}

func runSize(ctx context.Context, o options, size int) (_ *sizeResult, err error) {
	b, stop, err := startBench(ctx, o, "size")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	b.size, b.apps = size, max(size/4, 1)
	env, dir := b.env, b.dir
	b.kubectl = newKubectl(env, dir)
	if err := b.kubectl.warm(ctx); err != nil {
		return nil, err
	}

	w := newWorkload("x", b.apps)
	r := &sizeResult{Objects: w.objects(), Apps: w.apps, Namespaces: len(w.namespaces)}
	live, err := b.firstSync(ctx, &r.FirstSync, &r.Memory)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, live.agent.stop()) }()
	if err := b.change(ctx, live, &r.Change); err != nil {
		return nil, err
	}
	if err := b.steady(ctx, live, &r.Steady); err != nil {
		return nil, err
	}
	r.Memory.Managed = readMemory()
	if err := b.prof.heap(fmt.Sprintf("heap-%d", size)); err != nil {
		return nil, err
	}
	if err := b.drift(ctx, live, &r.Drift); err != nil {
		return nil, err
	}
	if o.restart {
		r.Restart = &restart{}
		if err := b.restart(ctx, live, r.Restart); err != nil {
			return nil, fmt.Errorf("restart: %w", err)
		}
	}
	return r, nil
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// install creates the Sync and Inventory CRDs and the Syncs' namespace.
func (b *bench) install(ctx context.Context) error {
	defs, err := crd.SyncCRDs()
	if err != nil {
		return err
	}
	for _, def := range defs {
		if err := b.admin.Create(ctx, def); err != nil {
			return fmt.Errorf("install the CRD %s: %w", def.Name, err)
		}
	}
	for _, def := range defs {
		if err := crd.WaitEstablished(ctx, b.admin, def.Name); err != nil {
			return err
		}
	}
	if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncNamespace}}); err != nil {
		return err
	}
	return b.installWebhookSecret(ctx)
}

// live is the agent kept running after its first sync, for the later
// phases.
type live struct {
	agent    *agent
	sync     string
	repo     *gitRepo
	work     *workload
	revision string
	watch    *syncWatch
}

// driftlessRun is one timed first sync by driftless.
type driftlessRun struct {
	wall, engine time.Duration
	requests     requestCounts
	server       requestCounts
	busy         time.Duration
	cpu          cpu
	// control is the CPU time of kube-apiserver and etcd over the sync.
	control     shardsCPU
	wallProfile *wallProfile
	latency     map[string]string
	// failed is set when the Sync failed instead of becoming Ready;
	// wall is then the time until it failed.
	failed *syncFailure
}

// driftlessFirstSync commits a fresh workload under prefix to a new
// repository, starts an agent and times a new Sync of it from creation to
// Ready. With keep, the agent keeps running and is returned; otherwise it
// is stopped and the Sync and its objects are deleted, so that the next
// agent's watches see none of them.
func (b *bench) driftlessFirstSync(ctx context.Context, prefix string, limits clientLimits, keep bool, mem *memResult) (*driftlessRun, *live, error) {
	w := newWorkload(prefix, b.apps)
	repoDir := filepath.Join(b.dir, "git-"+prefix)
	repo, err := newGitRepo(repoDir)
	if err != nil {
		return nil, nil, err
	}
	rev, err := repo.commit("initial", w.files)
	if err != nil {
		return nil, nil, err
	}
	// Every timed agent starts alike, so that the median compares like
	// with like: each serves the webhook receiver (which only the kept
	// one uses, in the later phases) and each start is framed by the
	// memory readings (which return the heap to the operating system),
	// though only the kept one's are reported. When only the kept agent
	// did both, its repetition was the slowest against its floor in
	// three of round 3's four loaded runs (docs/performance.md).
	before := readMemory()
	a, err := startAgent(ctx, b.env.Config, limits, b.o.concurrent, true, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	if idle := readMemory(); keep {
		mem.Before, mem.Idle = before, idle
	}
	if err := a.waitForWorkers(ctx, b.admin, repo.url()); err != nil {
		return nil, nil, errors.Join(err, a.stop())
	}
	name := "fleet-" + prefix
	sw, err := watchSync(ctx, b.admin, name)
	if err != nil {
		return nil, nil, errors.Join(err, a.stop())
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()

	var sampler *wallSampler
	stopCPU := func() {}
	if b.o.profileDir != "" && (keep || limits != b.o.limits) {
		sampler = startWallSampler(50 * time.Millisecond)
		kind := map[bool]string{true: "unthrottled", false: "shipped"}[limits.unthrottle]
		if stopCPU, err = b.prof.cpu(fmt.Sprintf("cpu-first-sync-%s-%d", kind, b.size)); err != nil {
			return nil, nil, err
		}
	}
	srvBefore, err := serverRequests(ctx, b.env.Clientset)
	if err != nil {
		return nil, nil, err
	}
	reqBefore, busyBefore := a.requests.snapshot()
	cpuBefore := readCPU()
	controlBefore, err := b.shardsCPU(nil)
	if err != nil {
		return nil, nil, errors.Join(err, a.stop())
	}
	contender := map[bool]string{true: "driftless-unthrottled", false: "driftless"}[limits.unthrottle]
	stopProfile := b.controlProfile(ctx, fmt.Sprintf("%s-%d-%s", contender, b.size, prefix))
	start := time.Now()
	if err := b.admin.Create(ctx, newSync(name, repo.url(), b.o.interval, b.o.syncTimeout)); err != nil {
		return nil, nil, errors.Join(err, stopProfile(), a.stop())
	}
	s, at, err := sw.until(waitCtx, rev, func(s *v1alpha1.Sync) bool { return syncedAt(s, rev) })
	var failure *syncFailure
	if err != nil && !errors.As(err, &failure) {
		return nil, nil, errors.Join(err, stopProfile(), a.stop())
	}
	run := &driftlessRun{wall: at.Sub(start), cpu: readCPU().minus(cpuBefore), failed: failure}
	if control, err := b.shardsCPU(nil); err == nil {
		run.control = shardsCPU{APIServer: control.APIServer - controlBefore.APIServer, Etcd: control.Etcd - controlBefore.Etcd}
	}
	if err := stopProfile(); err != nil {
		return nil, nil, errors.Join(err, a.stop())
	}
	stopCPU()
	if sampler != nil {
		p := sampler.finish()
		run.wallProfile = &p
	}
	reqAfter, busyAfter := a.requests.snapshot()
	run.requests, run.busy = reqAfter.minus(reqBefore), busyAfter-busyBefore
	srvAfter, err := serverRequests(ctx, b.env.Clientset)
	if err != nil {
		return nil, nil, err
	}
	run.server = srvAfter.minus(srvBefore)
	run.latency = a.requests.latencies()
	if failure == nil && len(s.Status.History) > 0 {
		run.engine, _ = time.ParseDuration(s.Status.History[0].Duration)
		if got := s.Status.History[0].Created; got != w.objects() {
			return nil, nil, errors.Join(fmt.Errorf("the first sync created %d objects, want %d", got, w.objects()), a.stop())
		}
	}
	if keep && failure == nil {
		return run, &live{agent: a, sync: name, repo: repo, work: w, revision: rev, watch: sw}, nil
	}
	sw.stop()
	if err := a.stop(); err != nil {
		return nil, nil, err
	}
	return run, nil, b.forget(ctx, name, w)
}

// forget deletes a stopped agent's Sync and the objects it applied (the
// Namespaces only lose their label: without a controller manager a
// deleted Namespace would stay Terminating).
func (b *bench) forget(ctx context.Context, syncName string, w *workload) error {
	sync := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: syncName}}
	// The agent is stopped: nobody would run the Sync's finalizer.
	unfinalize := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := b.admin.Patch(ctx, sync, unfinalize); err != nil {
		return err
	}
	if err := b.admin.Delete(ctx, sync); err != nil {
		return err
	}
	selector := v1alpha1.SyncLabel + "=" + v1alpha1.SyncLabelValue(syncNamespace, syncName)
	for _, ns := range w.namespaces {
		for _, kind := range []string{"Deployment", "Service", "ConfigMap", "ServiceAccount"} {
			err := b.dynamic.Resource(resources[kind]).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return fmt.Errorf("delete %s in %s: %w", kind, ns, err)
			}
		}
		patch := []byte(`{"metadata":{"labels":{"` + v1alpha1.SyncLabel + `":null}}}`)
		_, err := b.dynamic.Resource(resources["Namespace"]).Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unlabel namespace %s: %w", ns, err)
		}
	}
	return nil
}
