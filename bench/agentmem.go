package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/internal/testenv"
)

// agentMemory is the memory of `driftless agent` run as a process of its
// own, as a cluster runs it: no harness in its RSS, no forced GC, read
// from /proc/<pid>/status.
type agentMemory struct {
	// Shape is "one Sync" or "many Syncs".
	Shape   string `json:"shape"`
	Syncs   int    `json:"syncs"`
	Objects int    `json:"objects"`
	// AllReady is from creating the Syncs until every one was Ready.
	AllReady float64 `json:"all_ready_s"`
	// IdleMiB is VmRSS once the agent, with no Sync yet, was quiet.
	IdleMiB float64 `json:"idle_rss_mib"`
	// PeakMiB is VmHWM when every Sync was Ready: the most the process
	// held, over its start and first syncs.
	PeakMiB float64 `json:"peak_rss_mib"`
	// QuietMiB is VmRSS once the agent, every Sync Ready, made no API
	// request for quietFor: the first sync's garbage is still held.
	QuietMiB float64 `json:"quiet_rss_mib"`
	// SteadyMiB is VmRSS quietFor after the first garbage collection
	// that followed (the runtime runs one at least every two minutes):
	// what the agent keeps while nothing changes.
	SteadyMiB float64 `json:"steady_rss_mib"`
	// SteadyFileMiB is the file-backed part of SteadyMiB (RssFile: the
	// binary's pages, which the kernel may drop and read again), and
	// SteadyHeapMiB the Go heap in use then (go_memstats_heap_alloc_bytes,
	// no GC forced).
	SteadyFileMiB float64 `json:"steady_rss_file_mib"`
	SteadyHeapMiB float64 `json:"steady_heap_mib"`
	// SteadyLiveMiB is the heap the last GC found live
	// (go_gc_heap_live_bytes): what the agent holds, garbage apart.
	SteadyLiveMiB float64 `json:"steady_heap_live_mib"`
	IdleFileMiB   float64 `json:"idle_rss_file_mib"`
	IdleHeapMiB   float64 `json:"idle_heap_mib"`
	// IdleMappings is the idle RSS by kind of mapping (the binary's code,
	// read-only data and data, anonymous memory, stack), from smaps.
	IdleMappings []mapping `json:"idle_mappings,omitempty"`
	// PerThousand and PerSync are SteadyMiB and PeakMiB less IdleMiB, per
	// 1,000 objects and per Sync.
	SteadyPerThousand float64 `json:"steady_mib_per_1000_objects"`
	PeakPerThousand   float64 `json:"peak_mib_per_1000_objects"`
	SteadyPerSync     float64 `json:"steady_mib_per_sync"`
	PeakPerSync       float64 `json:"peak_mib_per_sync"`
	// ReadyCPU is the CPU time (user and system) the agent process used
	// from its start until every Sync was Ready: what a lower GOGC costs
	// shows here, against a run of the other binary on the same load.
	ReadyCPU float64 `json:"ready_cpu_s"`
	// GoMemLimit is the agent's GOMEMLIMIT, "" for none.
	GoMemLimit string `json:"gomemlimit,omitempty"`
}

// quietFor is how long the agent process must make no API request before
// its steady RSS is read.
const quietFor = 3 * time.Second

// agentBinary builds `driftless agent` into dir as the Dockerfile builds
// the image's binary (testenv.BuildAgent: static, with its tags), without
// symbol tables. Only -trimpath is left out: it would compile every
// package again and changes nothing the process maps.
func agentBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "driftless")
	if err := testenv.BuildAgent(bin, "-ldflags", "-s -w"); err != nil {
		return "", err
	}
	return bin, nil
}

// runAgentMemory measures the agent binary bin over syncs Syncs of
// perSync objects' worth of apps each (one Sync: perSync is the apps'
// objects in it), on a control plane of its own.
func runAgentMemory(ctx context.Context, o options, bin, shape string, syncs, apps int) (_ *agentMemory, err error) {
	b, stop, err := startBench(ctx, o, "agent-memory")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()

	w := newWorkload("m", apps)
	paths := make([][]string, syncs)
	if syncs == 1 {
		paths[0] = nil // the whole repository
	} else {
		w = newWorkload("m", 0)
		w.files = map[string]string{}
		for i := range syncs {
			ns := fmt.Sprintf("m-%02d", i/appsPerNamespace)
			if i%appsPerNamespace == 0 {
				w.namespaces = append(w.namespaces, ns)
			}
			file := fmt.Sprintf("syncs/%s/s-%04d.yaml", ns, i)
			w.files[file] = tenObjects(ns, i)
			paths[i] = []string{file}
		}
	}
	objects := w.objects()
	if syncs > 1 {
		objects = 10 * syncs
		for _, ns := range w.namespaces {
			if err := b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return nil, err
			}
		}
	}
	repo, err := newGitRepo(filepath.Join(b.dir, "git"))
	if err != nil {
		return nil, err
	}
	rev, err := repo.commit("initial", w.files)
	if err != nil {
		return nil, err
	}
	if err := dropPageCache(bin); err != nil {
		return nil, err
	}
	p, err := startAgentProcess(bin, b.env, b.dir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, p.stop()) }()
	if err := p.quiet(ctx, quietFor, 2*time.Minute); err != nil {
		return nil, err
	}
	m := &agentMemory{Shape: shape, Syncs: syncs, Objects: objects, GoMemLimit: os.Getenv("GOMEMLIMIT")}
	if m.IdleMiB, m.IdleFileMiB, m.IdleHeapMiB, err = p.rss(ctx); err != nil {
		return nil, err
	}
	if m.IdleMappings, err = readSmaps(p.cmd.Process.Pid); err != nil {
		return nil, err
	}
	step("agent process %d idle: %.0f MiB RSS (%s); creating %d Syncs, %d objects", p.cmd.Process.Pid, m.IdleMiB, formatMappings(m.IdleMappings), syncs, objects)
	start := time.Now()
	for i := range syncs {
		s := newSync(fmt.Sprintf("mem-%04d", i), repo.url(), time.Hour, o.syncTimeout)
		s.Spec.Paths = paths[i]
		if err := b.admin.Create(ctx, s); err != nil {
			return nil, err
		}
	}
	if err := allReady(ctx, b.admin, syncs, rev); err != nil {
		return nil, errors.Join(err, p.exited())
	}
	m.AllReady = time.Since(start).Seconds()
	if m.PeakMiB, err = p.status("VmHWM"); err != nil {
		return nil, err
	}
	if m.ReadyCPU, err = p.cpu(); err != nil {
		return nil, err
	}
	if err := p.quiet(ctx, quietFor, 5*time.Minute); err != nil {
		return nil, err
	}
	if m.QuietMiB, err = p.status("VmRSS"); err != nil {
		return nil, err
	}
	if err := p.collected(ctx, 3*time.Minute); err != nil {
		return nil, err
	}
	if err := p.quiet(ctx, quietFor, 5*time.Minute); err != nil {
		return nil, err
	}
	if m.SteadyMiB, m.SteadyFileMiB, m.SteadyHeapMiB, err = p.rss(ctx); err != nil {
		return nil, err
	}
	live, err := p.metric(ctx, "go_gc_heap_live_bytes")
	if err != nil {
		return nil, err
	}
	m.SteadyLiveMiB = live / (1 << 20)
	// A sync after the first read may have raised the peak.
	if m.PeakMiB, err = p.status("VmHWM"); err != nil {
		return nil, err
	}
	m.SteadyPerThousand = (m.SteadyMiB - m.IdleMiB) * 1000 / float64(objects)
	m.PeakPerThousand = (m.PeakMiB - m.IdleMiB) * 1000 / float64(objects)
	m.SteadyPerSync = (m.SteadyMiB - m.IdleMiB) / float64(syncs)
	m.PeakPerSync = (m.PeakMiB - m.IdleMiB) / float64(syncs)
	step("agent process, %s (%d Syncs, %d objects): Ready in %.1f s, %.1f s of CPU; RSS peak %.0f MiB, once quiet %.0f MiB, steady after a GC %.0f MiB (file %.0f, heap %.0f, live %.0f), idle %.0f MiB (file %.0f, heap %.0f)",
		shape, syncs, objects, m.AllReady, m.ReadyCPU, m.PeakMiB, m.QuietMiB, m.SteadyMiB, m.SteadyFileMiB, m.SteadyHeapMiB, m.SteadyLiveMiB, m.IdleMiB, m.IdleFileMiB, m.IdleHeapMiB)
	return m, nil
}

// tenObjects is one Sync's file in the many-Syncs shape: two apps (eight
// objects) and two more ConfigMaps.
func tenObjects(ns string, i int) string {
	out := appYAML(ns, fmt.Sprintf("s%04d-a", i), "v1") + "---\n" + appYAML(ns, fmt.Sprintf("s%04d-b", i), "v1")
	for _, suffix := range []string{"flags", "env"} {
		out += fmt.Sprintf(`---
apiVersion: v1
kind: ConfigMap
metadata:
  name: s%04d-%s
  namespace: %s
data:
  LOG_LEVEL: info
`, i, suffix, ns)
	}
	return out
}

// agentProcess is the agent binary running against a bench control plane.
type agentProcess struct {
	cmd     *exec.Cmd
	log     string
	metrics string
	done    chan error
}

// loopbackAddr is a loopback address with a port the kernel just handed
// out and took back, free for a server to listen on.
func loopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// startAgentProcess starts bin as `driftless agent` with the control
// plane's admin kubeconfig, its metrics on a loopback port, its cache and
// log under dir, and the flags extra.
func startAgentProcess(bin string, env *testenv.Env, dir string, extra ...string) (*agentProcess, error) {
	addr, err := loopbackAddr()
	if err != nil {
		return nil, err
	}
	p := &agentProcess{log: filepath.Join(dir, "agent.log"), metrics: "http://" + addr + "/metrics", done: make(chan error, 1)}
	logFile, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	p.cmd = exec.Command(bin, "agent",
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", syncNamespace,
		"--leader-elect=false",
		"--metrics-bind-address", addr,
		"--health-probe-bind-address", "0",
		"--cache-dir", filepath.Join(dir, "agent-cache"))
	p.cmd.Args = append(p.cmd.Args, extra...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := testenv.StartTied(p.cmd); err != nil {
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, nil
}

// status reads a field of the process's /proc/<pid>/status, in MiB.
func (p *agentProcess) status(field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
}

// cpu reads the process's user and system CPU time so far, in seconds,
// from /proc/<pid>/stat (clock ticks of 1/100 s, Linux's USER_HZ).
func (p *agentProcess) cpu() (float64, error) { return cpuSeconds(p.cmd.Process.Pid) }

// rss reads the process's VmRSS and RssFile, and its Go heap in use.
func (p *agentProcess) rss(ctx context.Context) (rss, file, heap float64, err error) {
	if rss, err = p.status("VmRSS"); err == nil {
		file, err = p.status("RssFile")
	}
	if err == nil {
		var b float64
		b, err = p.metric(ctx, "go_memstats_heap_alloc_bytes")
		heap = b / (1 << 20)
	}
	return rss, file, heap, err
}

// requests is the agent's rest_client_requests_total, from its metrics.
func (p *agentProcess) requests(ctx context.Context) (float64, error) {
	return p.metric(ctx, "rest_client_requests_total")
}

// metric is the sum of a metric's samples on the agent's metrics endpoint.
func (p *agentProcess) metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metrics, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		value := rest
		if strings.HasPrefix(rest, "{") {
			_, value, _ = strings.Cut(rest, "} ")
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil {
			total += n
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return total, sc.Err()
}

// quiet waits until the agent process made no API request for period
// (its metrics endpoint answering), within limit.
func (p *agentProcess) quiet(ctx context.Context, period, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, lastChange := -1.0, time.Now()
	for {
		n, err := p.requests(ctx)
		switch {
		case err != nil:
			lastChange = time.Now() // not serving metrics yet
		case n != last:
			last, lastChange = n, time.Now()
		case time.Since(lastChange) >= period:
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("the agent process was not quiet for %s within %s", period, limit), err, p.exited())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-p.done:
			p.done <- err
			return p.exited()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// collected waits, within limit, until the agent process has run a
// garbage collection after this call.
func (p *agentProcess) collected(ctx context.Context, limit time.Duration) error {
	const cycles = "go_gc_cycles_total_gc_cycles_total"
	before, err := p.metric(ctx, cycles)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		n, err := p.metric(ctx, cycles)
		if err != nil {
			return errors.Join(err, p.exited())
		}
		if n > before {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent process ran no garbage collection within %s", limit)
		}
	}
}

// exited returns an error with the end of the agent's log if the process
// has exited, else nil.
func (p *agentProcess) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		data, _ := os.ReadFile(p.log)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		return fmt.Errorf("the agent process exited (%v); its log ends:\n%s", err, data)
	default:
		return nil
	}
}

// stop ends the agent process with SIGTERM and waits for it.
func (p *agentProcess) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// runAgentMemories measures the agent process on one Sync of the largest
// size's objects and on o.syncs Syncs of 10 objects, as far as the run
// covers them.
func runAgentMemories(ctx context.Context, o options, bin string, res *results) error {
	if n := len(o.sizes); n > 0 {
		size := o.sizes[n-1]
		fmt.Fprintf(os.Stderr, "== the agent process: one Sync of %d objects\n", size)
		m, err := runAgentMemory(ctx, o, bin, "one Sync", 1, max(size/4, 1))
		if err != nil {
			return fmt.Errorf("agent process, one Sync of %d objects: %w", size, err)
		}
		res.AgentMemory = append(res.AgentMemory, *m)
	}
	if o.syncs > 0 {
		fmt.Fprintf(os.Stderr, "== the agent process: %d Syncs of 10 objects\n", o.syncs)
		m, err := runAgentMemory(ctx, o, bin, "many Syncs", o.syncs, 0)
		if err != nil {
			return fmt.Errorf("agent process, %d Syncs: %w", o.syncs, err)
		}
		res.AgentMemory = append(res.AgentMemory, *m)
	}
	return nil
}
