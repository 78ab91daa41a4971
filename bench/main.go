package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/driftless/driftless/internal/controller"
)

// options are the command line.
type options struct {
	full    bool
	sizes   []int
	repeats int
	// changeRepeats is how many triggered and webhook changes are timed.
	changeRepeats int
	concurrencies []int
	interval      time.Duration
	intervals     int
	edits         int
	// unthrottledRepeats times driftless without its client-side rate
	// limit, a diagnostic, this many times (0: never).
	unthrottledRepeats int
	// kubectlRepeats times kubectl apply --server-side, the comparison,
	// this many times at each size.
	kubectlRepeats int
	// intervalChanges is how many changes wait for the next interval.
	intervalChanges int
	resultsDir      string
	profileDir      string
	// apiserverProfileDir receives CPU profiles of kube-apiserver and
	// etcd over each timed first sync and the fleet case (controlProfile).
	apiserverProfileDir string
	// limits are the timed agent's client-side rate limits.
	limits clientLimits
	// concurrent is the agent's --concurrent; 0 leaves its default.
	concurrent int
	// syncTimeout is the Syncs' spec.timeout; 0 leaves the default.
	syncTimeout time.Duration
	// syncs is the fleet case's number of one-app Syncs; 0 skips it.
	syncs int
	// overlays is the render cache case's number of Kustomize apps in
	// one Sync; 0 skips it.
	overlays int
	// restart runs the restart case at each size.
	restart bool
	// agentMemory measures the agent binary as a process of its own.
	agentMemory bool
	// agentMemoryOnly runs only the agent process's memory case.
	agentMemoryOnly bool
	// agentBinary is a driftless binary to measure instead of building one.
	agentBinary string
	// remoteClusters is the remote-cluster case's number of kubeconfig
	// Secrets, over remotePlanes control planes, of remoteSyncs Syncs
	// each; 0 skips it.
	remoteClusters, remotePlanes, remoteSyncs int
	// shardSyncs is the sharded fleet case's number of Syncs of 10
	// objects, over shards agent processes; 0 skips it.
	shardSyncs int
	shards     int
	// shardFloorSyncs is how many of the sharded fleet's Syncs' objects
	// the validated floor, its baseline, applies; 0 skips it.
	shardFloorSyncs int
	// admissionWrites is how many writes the admission webhook case
	// times with the webhook, and as many without; 0 skips it.
	admissionWrites int
}

func main() {
	o := options{}
	// A flag set of its own: controller-runtime registers -kubeconfig on the global one.
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	var sizes, concurrencies string
	fs.BoolVar(&o.full, "full", false, "run every size (100, 1,000, 5,000 and 10,000 objects) instead of the quick profile (1,000); the 10,000-object size times each case once")
	fs.StringVar(&sizes, "sizes", "", "comma-separated object counts, overriding -full; none runs only the fleet case")
	fs.IntVar(&o.repeats, "repeat", 3, "repetitions of each timing")
	fs.IntVar(&o.changeRepeats, "change-repeat", 0, "one-object changes timed per trigger (spec edit, webhook push notice); 0: -repeat")
	fs.StringVar(&concurrencies, "floor-concurrency", "4,8,16,32,64", "concurrencies tried for the raw server-side-apply floor; the validated floor runs at the fastest (the agent keeps up to 64 requests in flight, --apply-concurrency)")
	fs.DurationVar(&o.interval, "interval", 10*time.Second, "the Sync's interval in the change and steady-state phases")
	fs.IntVar(&o.intervals, "steady-intervals", 3, "intervals measured in steady state")
	fs.IntVar(&o.edits, "edits", 50, "drift edits to revert")
	fs.IntVar(&o.unthrottledRepeats, "unthrottled-repeat", 0, "times driftless's first sync is also timed without any client-side rate limit, a diagnostic for -client-limits QPS/BURST (as shipped, the agent sets none when the API server applies priority and fairness, as the bench's does)")
	fs.IntVar(&o.kubectlRepeats, "kubectl-repeat", -1, "times kubectl apply --server-side is timed at each size, the comparison; -1: -repeat, once with -full at 5,000 objects and more")
	fs.IntVar(&o.intervalChanges, "interval-changes", 1, "changes that wait for the Sync's next interval (their latency is mostly where in the interval they land)")
	fs.StringVar(&o.resultsDir, "results", "bench/results", "directory for the results JSON")
	limits := fs.String("client-limits", "agent", "client-side rate limit of the timed agent: agent (what driftless agent sets by default), none, or QPS/BURST")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", 0, "spec.timeout of the timed Syncs; 0 leaves the API's default (5m)")
	fs.IntVar(&o.overlays, "overlays", 100, "Kustomize overlays of one base in one Sync, in the render cache case; 0 skips it")
	fs.IntVar(&o.syncs, "syncs", 1000, "Syncs of 4 objects each, all reading one repository, in the fleet case; 0 skips it")
	fs.IntVar(&o.concurrent, "concurrent", 0, fmt.Sprintf("the agent's --concurrent (Syncs reconciled and drifted objects checked at the same time); 0 leaves its default (%d)", controller.DefaultConcurrency))
	fs.BoolVar(&o.restart, "restart", true, "at each size, after the other phases, restart the agent over the objects in sync: writes until serving and time to serving against one full LIST; -restart=false skips it")
	fs.BoolVar(&o.agentMemory, "agent-memory", true, "measure the RSS of the driftless agent binary as a process of its own (peak over its first syncs, steady after), on one Sync of the largest size's objects and on -syncs Syncs of 10 objects; -agent-memory=false skips it")
	fs.BoolVar(&o.agentMemoryOnly, "agent-memory-only", false, "run only the agent process's memory case, at the largest of -sizes and with -syncs Syncs")
	fs.StringVar(&o.agentBinary, "agent-binary", "", "the driftless binary the agent process case runs; empty builds ./cmd/driftless from this checkout")
	fs.IntVar(&o.admissionWrites, "admission-writes", 400, "writes of a managed object timed with the admission webhook (--admission-warnings) registered, and as many without, in alternating rounds; 0 skips the case")
	fs.IntVar(&o.remoteClusters, "remote-clusters", -1, "remote clusters (spec.kubeConfig Secrets, each with a token of its own) one agent drives, after as many Syncs of its own cluster as the baseline; -1: 10 with -full, else none")
	fs.IntVar(&o.remotePlanes, "remote-planes", 2, "real control planes that serve the -remote-clusters kubeconfigs, round robin")
	fs.IntVar(&o.remoteSyncs, "remote-syncs", -1, "Syncs of one app (4 objects) per remote cluster, and in the baseline; -1: 50")
	fs.IntVar(&o.shardSyncs, "shard-syncs", -1, "Syncs of 10 objects, all reading one repository, spread over -shards agent processes (agent --shard) in the sharded fleet case; 0 skips it; -1: 1,000 with -full, else 0 (10,000, the issue's row, takes well over half an hour on two cores: docs/performance.md)")
	fs.IntVar(&o.shards, "shards", 4, "agent processes (shards) of the sharded fleet case")
	fs.IntVar(&o.shardFloorSyncs, "shard-floor-syncs", 1000, "before the sharded fleet case, time the validated floor on its control plane over the objects of this many of its Syncs (at most -shard-syncs), its baseline, scaled to all of them; 0 skips it")
	fs.StringVar(&o.profileDir, "profile", "", "write pprof CPU and heap profiles of the engine, and a wall-time breakdown, into this directory")
	fs.StringVar(&o.apiserverProfileDir, "apiserver-profile", "", "write CPU profiles of kube-apiserver (<contender>-<size>-<rep>.pprof) and etcd (…-etcd.pprof) over each timed first sync and the fleet case into this directory")
	chart := fs.String("chart", "", "only render the SVG chart of this results JSON next to it, and exit")
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if *chart != "" {
		out, err := chartFrom(*chart)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "wrote", out)
		return
	}

	var err error
	switch {
	case sizes == "none":
		o.sizes = nil
	case sizes != "":
		o.sizes, err = ints(sizes)
	case o.full:
		o.sizes = []int{100, 1000, 5000, largeSize}
	default:
		o.sizes = []int{1000}
	}
	if err == nil {
		o.concurrencies, err = ints(concurrencies)
	}
	if o.remoteClusters < 0 {
		o.remoteClusters = map[bool]int{true: 10, false: 0}[o.full]
	}
	if o.shardSyncs < 0 {
		o.shardSyncs = map[bool]int{true: 1000, false: 0}[o.full]
	}
	if o.changeRepeats <= 0 {
		o.changeRepeats = o.repeats
	}
	if o.kubectlRepeats < 0 {
		o.kubectlRepeats = o.repeats
	}
	if o.remoteSyncs < 0 {
		o.remoteSyncs = 50
	}
	if err == nil {
		o.limits, err = parseLimits(*limits)
	}
	if o.limits.unthrottle {
		o.unthrottledRepeats = 0 // the timed agent is the diagnostic
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// largeSize is the full profile's largest size, the one the targets at
// 10,000 objects are read from.
const largeSize = 10000

// forSize is the options for one size. The full profile times kubectl,
// the comparison, once from 5,000 objects on (35 s a run there), and its
// largest size once, with the floor at its highest concurrency only, 20 edits and
// 3 quiet intervals: repeated like the smaller sizes it would take most of
// an hour here, and at 10,000 objects one run's spread is small next to
// the differences the targets are about.
func (o options) forSize(size int) options {
	if o.full && size >= 5000 {
		o.kubectlRepeats = min(o.kubectlRepeats, 1)
	}
	if !o.full || size < largeSize {
		return o
	}
	o.repeats = 1
	o.changeRepeats = min(o.changeRepeats, 3)
	o.unthrottledRepeats = 0
	o.concurrencies = []int{slices.Max(o.concurrencies)}
	o.edits = min(o.edits, 20)
	o.intervals = min(o.intervals, 3)
	o.intervalChanges = min(o.intervalChanges, 1)
	return o
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a list of positive numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// results is what a run writes to bench/results.
type results struct {
	Date    time.Time `json:"date"`
	Commit  string    `json:"commit"`
	Dirty   bool      `json:"dirty"`
	Go      string    `json:"go"`
	CPUs    int       `json:"cpus"`
	Profile string    `json:"profile"`
	Options string    `json:"options"`
	// ClientLimits are the timed agent's client-side rate limits.
	ClientLimits string       `json:"client_limits"`
	Sizes        []sizeResult `json:"sizes"`
	Memory10k    *projection  `json:"memory_10k_projection,omitempty"`
	Fleet        *fleet       `json:"fleet,omitempty"`
	// AgentMemory is the agent binary's memory, measured as a process
	// of its own, at each shape run.
	AgentMemory []agentMemory `json:"agent_memory,omitempty"`
	Overlays    *overlays     `json:"overlays,omitempty"`
	// Remote is one agent driving several remote clusters.
	Remote *remoteFleet `json:"remote_clusters,omitempty"`
	// Shards is the sharded fleet: Syncs over several agent processes.
	Shards *shardsRun `json:"shards,omitempty"`
	// Admission is the admission webhook's cost to a write.
	Admission *admissionCost `json:"admission,omitempty"`
	Summary   string         `json:"summary"`
	Seconds   float64        `json:"seconds"`
	// Cases is each case's wall time, in the order they ran, so the
	// length of make bench FULL=1 can be read case by case.
	Cases []caseTime `json:"cases"`
}

// caseTime is how long one case of a run took.
type caseTime struct {
	Case    string  `json:"case"`
	Seconds float64 `json:"seconds"`
}

// timed records the wall time of one case since started.
func (r *results) timed(name string, started time.Time) {
	r.Cases = append(r.Cases, caseTime{Case: name, Seconds: time.Since(started).Seconds()})
}

func run(ctx context.Context, o options) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
		runtime.MemProfileRate = 16 << 10 // finer than the default 512 KiB, for the agent's small heap
	}
	if o.apiserverProfileDir != "" {
		if err := os.MkdirAll(o.apiserverProfileDir, 0o755); err != nil {
			return err
		}
	}
	start := time.Now()
	res := &results{
		Date:         start.UTC(),
		Go:           runtime.Version(),
		CPUs:         runtime.NumCPU(),
		Profile:      map[bool]string{true: "full", false: "quick"}[o.full],
		Options:      strings.Join(os.Args[1:], " "),
		ClientLimits: o.limits.name,
	}
	res.Commit, res.Dirty = commit()
	bin := o.agentBinary
	o.agentMemory = o.agentMemory || o.agentMemoryOnly
	if (o.agentMemory || o.shardSyncs > 0) && bin == "" && (len(o.sizes) > 0 || o.syncs > 0 || o.shardSyncs > 0) {
		dir, err := os.MkdirTemp("", "driftless-bench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		step("building the agent binary")
		if bin, err = agentBinary(dir); err != nil {
			return err
		}
	}
	for _, size := range o.sizes {
		if o.agentMemoryOnly {
			break
		}
		fmt.Fprintf(os.Stderr, "== %d objects\n", size)
		t0 := time.Now()
		r, err := runSize(ctx, o.forSize(size), size)
		res.timed(fmt.Sprintf("%d objects", size), t0)
		if err != nil {
			return fmt.Errorf("%d objects: %w", size, err)
		}
		res.Sizes = append(res.Sizes, *r)
	}
	if o.overlays > 0 && !o.agentMemoryOnly {
		fmt.Fprintf(os.Stderr, "== %d Kustomize overlays in one Sync\n", o.overlays)
		t0 := time.Now()
		ov, err := runOverlays(ctx, o, o.overlays)
		res.timed("overlays", t0)
		if err != nil {
			return fmt.Errorf("%d overlays: %w", o.overlays, err)
		}
		res.Overlays = ov
	}
	if o.syncs > 0 && !o.agentMemoryOnly {
		fmt.Fprintf(os.Stderr, "== %d Syncs\n", o.syncs)
		t0 := time.Now()
		f, err := runFleet(ctx, o, o.syncs)
		res.timed("fleet", t0)
		if err != nil {
			return fmt.Errorf("%d Syncs: %w", o.syncs, err)
		}
		res.Fleet = f
	}
	if o.remoteClusters > 0 && !o.agentMemoryOnly {
		fmt.Fprintf(os.Stderr, "== %d remote clusters × %d Syncs\n", o.remoteClusters, o.remoteSyncs)
		t0 := time.Now()
		rf, err := runRemoteFleet(ctx, o, o.remoteClusters, max(o.remotePlanes, 1), o.remoteSyncs)
		res.timed("remote clusters", t0)
		if err != nil {
			return fmt.Errorf("%d remote clusters: %w", o.remoteClusters, err)
		}
		res.Remote = rf
	}
	if o.admissionWrites > 0 && !o.agentMemoryOnly {
		fmt.Fprintln(os.Stderr, "== the admission webhook's cost to a write")
		t0 := time.Now()
		a, err := runAdmission(ctx, o, o.admissionWrites)
		res.timed("admission", t0)
		if err != nil {
			return fmt.Errorf("admission webhook: %w", err)
		}
		res.Admission = a
	}
	if o.shardSyncs > 0 && o.shards > 0 && !o.agentMemoryOnly {
		fmt.Fprintf(os.Stderr, "== %d Syncs over %d shards\n", o.shardSyncs, o.shards)
		t0 := time.Now()
		sh, err := runShards(ctx, o, bin, o.shardSyncs, o.shards)
		res.timed("shards", t0)
		if err != nil {
			return fmt.Errorf("%d Syncs over %d shards: %w", o.shardSyncs, o.shards, err)
		}
		res.Shards = sh
	}
	if o.agentMemory && bin != "" {
		t0 := time.Now()
		err := runAgentMemories(ctx, o, bin, res)
		res.timed("agent process memory", t0)
		if err != nil {
			return err
		}
	}
	res.Memory10k = project(res.Sizes, 10000)
	res.Summary = summary(res)
	res.Seconds = time.Since(start).Seconds()

	if err := os.MkdirAll(o.resultsDir, 0o755); err != nil {
		return err
	}
	name := filepath.Join(o.resultsDir, fmt.Sprintf("%s-%s.json", res.Date.Format("2006-01-02T150405Z"), res.Commit))
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(name, append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s (%.0f s", name, res.Seconds)
	for _, c := range res.Cases {
		fmt.Fprintf(os.Stderr, "; %s %.0f s", c.Case, c.Seconds)
	}
	fmt.Fprintln(os.Stderr, ")")
	if len(res.Sizes) > 0 {
		var chart bytes.Buffer
		if err := writeChart(&chart, res); err != nil {
			return err
		}
		svg := strings.TrimSuffix(name, ".json") + ".svg"
		if err := os.WriteFile(svg, chart.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", svg)
	}
	printReport(os.Stdout, res)
	return nil
}

// commit is the short commit the bench was built from and whether it had
// uncommitted changes: the one built into the binary (builtFrom), so that
// a bench binary built at one commit and run from a checkout at another
// is named after its own; else the working tree's, which is the binary's
// under go run.
func commit() (string, bool) {
	if rev, dirty, ok := builtFrom(); ok {
		return rev, dirty
	}
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown", false
	}
	status, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), len(strings.TrimSpace(string(status))) > 0
}

// builtCommit names the commit a bench binary was built from, set with
// go build -ldflags "-X main.builtCommit=$(git rev-parse --short HEAD)".
var builtCommit string

// builtFrom is the short commit this binary was built from and whether
// it had uncommitted changes: builtCommit, or what the Go toolchain
// stamped into the binary (-buildvcs), if either says.
func builtFrom() (rev string, dirty, ok bool) {
	if builtCommit != "" {
		rev, dirty := strings.CutSuffix(builtCommit, "-dirty")
		return rev, dirty, true
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false, false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	return rev, dirty, rev != ""
}
