package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"
)

// profiler writes pprof profiles of the in-process engine into dir (none
// when dir is empty), and samples where the engine's goroutines spend wall
// time, which a CPU profile cannot show for a pipeline that mostly waits.
type profiler struct {
	dir string
}

// cpu starts a CPU profile named name; the returned func stops it.
func (p profiler) cpu(name string) (func(), error) {
	if p.dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(p.dir, name+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// heap writes a heap profile (after a GC) named name.
func (p profiler) heap(name string) error {
	if p.dir == "" {
		return nil
	}
	runtime.GC()
	f, err := os.Create(filepath.Join(p.dir, name+".pprof"))
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}

// wallSampler samples every goroutine's stack at a fixed period and
// tallies where the engine's reconciles are — the chain of driftless
// source lines from the reconcile inward — and whether the apply workers
// wait for the client-side rate limiter, wait for the API server, or run.
type wallSampler struct {
	period  time.Duration
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples int
	stages  map[string]int
	workers map[string]int
}

func startWallSampler(period time.Duration) *wallSampler {
	s := &wallSampler{period: period, stop: make(chan struct{}), done: make(chan struct{}), stages: map[string]int{}, workers: map[string]int{}}
	go s.run()
	return s
}

func (s *wallSampler) run() {
	defer close(s.done)
	buf := make([]byte, 16<<20)
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		n := runtime.Stack(buf, true)
		s.tally(string(buf[:n]))
	}
}

// followed are the frames whose goroutines the sampler follows, and the
// name it gives them.
var followed = []struct{ frame, name string }{
	{"controller.(*SyncReconciler).sync(", "sync"},
	{"controller.(*SyncReconciler).reconcile(", "reconcile"},
	{"controller.(*DriftReconciler).Reconcile(", "drift"},
}

func (s *wallSampler) tally(dump string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, g := range strings.Split(dump, "\n\n") {
		seen := false
		for _, r := range followed {
			if strings.Contains(g, r.frame) {
				s.stages[r.name+": "+chain(g, r.frame)]++
				seen = true
				break
			}
		}
		if !seen && (strings.Contains(g, "internal/apply.byRank") || strings.Contains(g, "internal/apply.(*Manager).write.func")) {
			s.workers[workerState(g)]++
		}
	}
}

// chain is where goroutine g is, from its frame root inward: the source
// lines of up to three driftless functions, "a.go:1 > b.go:2".
func chain(g, root string) string {
	lines := strings.Split(g, "\n")
	type frame struct{ fn, at string }
	var frames []frame // innermost first
	for i := 1; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "\t") && strings.HasPrefix(lines[i+1], "\t") {
			at := strings.TrimSpace(lines[i+1])
			if j := strings.Index(at, " +0x"); j >= 0 {
				at = at[:j]
			}
			if j := strings.Index(at, "/internal/"); j >= 0 {
				at = at[j+1:]
			}
			frames = append(frames, frame{fn: lines[i], at: at})
			i++
		}
	}
	var out []string
	inside := false
	for i := len(frames) - 1; i >= 0 && len(out) < 3; i-- {
		f := frames[i]
		if strings.Contains(f.fn, root) {
			inside = true
		}
		if inside && strings.Contains(f.fn, "github.com/driftless/driftless/internal/") {
			out = append(out, f.at)
		}
	}
	return strings.Join(out, " > ")
}

func workerState(g string) string {
	switch {
	case strings.Contains(g, "k8s.io/client-go/util/flowcontrol") || strings.Contains(g, "golang.org/x/time/rate"):
		return "waiting for the client-side rate limiter"
	case strings.Contains(g, "RoundTrip"):
		return "waiting for the API server (request in flight)"
	default:
		return "running or runnable (encode, decode, compare)"
	}
}

// wallProfile is what a wallSampler saw, in seconds of wall time.
type wallProfile struct {
	PeriodMS int                `json:"period_ms"`
	Samples  int                `json:"samples"`
	Stages   map[string]float64 `json:"reconcile_positions_s"`
	Workers  map[string]float64 `json:"apply_worker_seconds"`
}

func (s *wallSampler) finish() wallProfile {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.period.Seconds()
	p := wallProfile{PeriodMS: int(s.period.Milliseconds()), Samples: s.samples, Stages: map[string]float64{}, Workers: map[string]float64{}}
	for k, v := range s.stages {
		p.Stages[k] = float64(v) * sec
	}
	for k, v := range s.workers {
		p.Workers[k] = float64(v) * sec
	}
	return p
}

// lines renders a wall profile, largest first.
func (p wallProfile) lines() []string {
	var out []string
	add := func(title string, m map[string]float64) {
		keys := make([]string, 0, len(m))
		total := 0.0
		for k, v := range m {
			keys = append(keys, k)
			total += v
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
		out = append(out, title)
		for _, k := range keys {
			out = append(out, fmt.Sprintf("  %6.2f s  %4.0f%%  %s", m[k], 100*m[k]/total, k))
		}
	}
	add("reconciles, by where they are (wall time; nested calls left to right):", p.Stages)
	add("apply workers, by state (goroutine-seconds):", p.Workers)
	return out
}
