package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
// tallies, for the Sync reconcile, which line of the pipeline it is at,
// and for the apply workers, whether they wait for the client-side rate
// limiter, wait for the API server, or run.
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

// Frames of interest, as they appear in a goroutine dump.
var (
	syncFrame  = regexp.MustCompile(`controller\.\(\*SyncReconciler\)\.sync\(.*\)\n\t.*/(internal/controller/[a-z_]+\.go:\d+)`)
	applyFrame = regexp.MustCompile(`apply\.\(\*Manager\)\.(Apply|Prune)\(.*\)\n\t.*/(internal/apply/[a-z_]+\.go:\d+)`)
)

func (s *wallSampler) tally(dump string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, g := range strings.Split(dump, "\n\n") {
		switch {
		case strings.Contains(g, "controller.(*SyncReconciler).sync("):
			stage := "Reconcile (status, events)"
			if m := syncFrame.FindStringSubmatch(g); m != nil {
				stage = m[1]
			}
			if m := applyFrame.FindStringSubmatch(g); m != nil {
				stage += " > " + m[2]
			}
			s.stages[stage]++
		case strings.Contains(g, "internal/apply.byRank"):
			s.workers[workerState(g)]++
		}
	}
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
	Stages   map[string]float64 `json:"sync_stages_s"`
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
	add("sync reconcile, by position in the pipeline (wall time):", p.Stages)
	add("apply workers, by state (goroutine-seconds):", p.Workers)
	return out
}
