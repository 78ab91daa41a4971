package reliability

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

const (
	soakSyncs      = 100
	soakPerSync    = 50 // 5,000 objects
	soakCommits    = 10 * time.Second
	soakEdits      = time.Second
	soakSample     = 30 * time.Second
	soakRevertWait = time.Minute
)

// soakReading is one reading of the agent's metrics.
type soakReading struct {
	at         time.Duration
	goroutines int
	rssMiB     float64
}

func soakObject(sync, i int) string { return fmt.Sprintf("s%02d-c%02d", sync, i) }

// soakFile is Sync n's file: its ConfigMaps, the first holding value.
func soakFile(n int, value string) string {
	var b strings.Builder
	for i := range soakPerSync {
		v := "v1"
		if i == 0 {
			v = value
		}
		fmt.Fprintf(&b, "---\n%s", configMapData(soakObject(n, i), v))
	}
	return b.String()
}

// The soak (make soak; SOAK=2m for a short run): 5,000 ConfigMaps over
// 100 Syncs of one repository, a commit every 10 s (one Sync's object
// changes) and a hand edit every second (a different object each time)
// for SOAK. At the end the cluster equals the last revision, every hand
// edit was reverted, the agent's goroutines and memory did not grow
// beyond a bound, and its log holds no error.
func TestSoak(t *testing.T) {
	duration, err := time.ParseDuration(os.Getenv("SOAK"))
	if err != nil || duration <= 0 {
		t.Skip("the soak runs with SOAK=<duration> (make soak)")
	}
	ctx := context.Background()
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "soak")
	files := map[string]string{}
	for n := range soakSyncs {
		files[fmt.Sprintf("app-%02d/cms.yaml", n)] = soakFile(n, "r0")
	}
	head := repo.Commit(t, "5,000 ConfigMaps", files)
	keys := make([]client.ObjectKey, soakSyncs)
	for n := range soakSyncs {
		keys[n] = newSync(t, ns, fmt.Sprintf("app-%02d", n), repo.FileURL(), func(s *v1alpha1.Sync) {
			s.Spec.Paths = []string{fmt.Sprintf("app-%02d", n)}
			s.Spec.Interval = metav1.Duration{Duration: soakCommits}
		})
	}
	metricsAddr := freeAddr(t)
	agent := startAgentProcessAs(t, agentUser, ns, t.TempDir(), "--leader-elect=false", "--metrics-bind-address", metricsAddr)
	started := time.Now()
	allApplied := func(rev string) func() string {
		return func() string {
			for _, k := range keys {
				if msg := appliedAt(k, rev)(); msg != "" {
					return k.Name + ": " + msg
				}
			}
			return ""
		}
	}
	testenv.Eventually(t, 10*time.Minute, "every Sync applies the first revision", allApplied(head))
	t.Logf("soak: %d objects over %d Syncs applied in %s", soakSyncs*soakPerSync, soakSyncs, time.Since(started).Round(time.Second))

	var (
		mu        sync.Mutex
		latencies []time.Duration // of each hand edit, in the order made; -1: not reverted
		readings  []soakReading
		wg        sync.WaitGroup
	)
	read := func(at time.Duration) {
		r, err := agentMetrics(metricsAddr)
		if err != nil {
			t.Errorf("read the agent's metrics: %v", err)
			return
		}
		r.at = at
		readings = append(readings, r)
	}
	soakStart := time.Now()
	read(0)
	values := make([]string, soakSyncs)
	for n := range values {
		values[n] = "r0"
	}
	commits, edits := 0, 0
	nextCommit, nextEdit, nextSample := soakStart.Add(soakCommits), soakStart.Add(soakEdits), soakStart.Add(soakSample)
	for time.Since(soakStart) < duration {
		now := time.Now()
		switch {
		case !now.Before(nextCommit):
			commits++
			n := commits % soakSyncs
			values[n] = fmt.Sprintf("r%d", commits)
			head = repo.Commit(t, fmt.Sprintf("commit %d", commits), map[string]string{fmt.Sprintf("app-%02d/cms.yaml", n): soakFile(n, values[n])})
			nextCommit = nextCommit.Add(soakCommits)
		case !now.Before(nextEdit):
			// Objects 1–49 of each Sync, in turn: none is edited twice
			// within the fight window, and none is changed by a commit.
			i := edits
			edits++
			name := soakObject(i%soakSyncs, 1+(i/soakSyncs)%(soakPerSync-1))
			handEdit(t, ns, name, "edited")
			mu.Lock()
			latencies = append(latencies, -1)
			mu.Unlock()
			wg.Go(func() {
				edited := time.Now()
				for time.Since(edited) < soakRevertWait {
					var cm corev1.ConfigMap
					err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
					if err == nil && cm.Data["key"] == "v1" {
						mu.Lock()
						latencies[i] = time.Since(edited)
						mu.Unlock()
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			})
			nextEdit = nextEdit.Add(soakEdits)
		case !now.Before(nextSample):
			read(time.Since(soakStart))
			nextSample = nextSample.Add(soakSample)
		default:
			time.Sleep(10 * time.Millisecond) // the pace of the soak, not a synchronisation
		}
	}
	wg.Wait()
	testenv.Eventually(t, 5*time.Minute, "every Sync applies the last revision", allApplied(head))
	read(time.Since(soakStart))

	// The cluster equals the last revision.
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.HasLabels{v1alpha1.SyncLabel}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cm := range list.Items {
		got[cm.Name] = cm.Data["key"]
	}
	wrong := 0
	for n := range soakSyncs {
		for i := range soakPerSync {
			want := "v1"
			if i == 0 {
				want = values[n]
			}
			if v, ok := got[soakObject(n, i)]; !ok || v != want {
				wrong++
				if wrong <= 10 {
					t.Errorf("ConfigMap %s holds %q (exists: %t), want %q from the last revision", soakObject(n, i), v, ok, want)
				}
			}
		}
	}
	if len(got) != soakSyncs*soakPerSync {
		t.Errorf("%d labelled ConfigMaps, want %d", len(got), soakSyncs*soakPerSync)
	}

	// Every hand edit was reverted; p99 at the start and at the end.
	missed := 0
	for _, l := range latencies {
		if l < 0 {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d hand edits were not reverted within %s", missed, len(latencies), soakRevertWait)
	}
	quarter := max(len(latencies)/4, 1)
	t.Logf("soak %s: %d commits, %d hand edits, %d not reverted; revert latency p50/p99 in the first quarter %s, in the last quarter %s; objects not at the last revision: %d",
		duration, commits, edits, missed, percentiles(latencies[:quarter]), percentiles(latencies[len(latencies)-quarter:]), wrong)

	// Goroutines and memory: the last reading within a bound of the first.
	first, last := readings[0], readings[len(readings)-1]
	var maxG int
	var maxRSS float64
	for _, r := range readings {
		maxG, maxRSS = max(maxG, r.goroutines), max(maxRSS, r.rssMiB)
	}
	t.Logf("agent goroutines first/last/max %d/%d/%d, RSS first/last/max %.0f/%.0f/%.0f MiB (%d readings, every %s)",
		first.goroutines, last.goroutines, maxG, first.rssMiB, last.rssMiB, maxRSS, len(readings), soakSample)
	if last.goroutines > first.goroutines+first.goroutines/5+50 {
		t.Errorf("goroutines grew from %d to %d over the soak: more than 20%% + 50", first.goroutines, last.goroutines)
	}
	if last.rssMiB > first.rssMiB*1.5 {
		t.Errorf("RSS grew from %.0f MiB to %.0f MiB over the soak: more than 50%%", first.rssMiB, last.rssMiB)
	}

	// No error in the agent's log.
	logData, err := os.ReadFile(agent.log)
	if err != nil {
		t.Fatal(err)
	}
	var errorLines []string
	for line := range strings.Lines(string(logData)) {
		if strings.Contains(line, "\tERROR\t") {
			errorLines = append(errorLines, line)
		}
	}
	if len(errorLines) > 0 {
		t.Errorf("%d error lines in the agent's log, the first:\n%s", len(errorLines), strings.Join(errorLines[:min(len(errorLines), 5)], ""))
	}
}

// percentiles formats the p50 and p99 of ds (reverted edits only).
func percentiles(ds []time.Duration) string {
	var ok []time.Duration
	for _, d := range ds {
		if d >= 0 {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "-"
	}
	slices.Sort(ok)
	at := func(p float64) time.Duration { return ok[min(len(ok)-1, int(p*float64(len(ok))))] }
	return at(0.5).Round(time.Millisecond).String() + "/" + at(0.99).Round(time.Millisecond).String()
}

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// agentMetrics reads go_goroutines and process_resident_memory_bytes
// from the agent's metrics endpoint.
func agentMetrics(addr string) (soakReading, error) {
	var r soakReading
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			r.goroutines = int(f)
		case "process_resident_memory_bytes":
			r.rssMiB = f / (1 << 20)
		}
	}
	return r, sc.Err()
}
