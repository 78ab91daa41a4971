package reliability

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// gitFront is a TCP front of a git server's SSH endpoint that counts the
// connections made to it: one per fetch attempt, whether the server
// behind it is up or not.
type gitFront struct {
	l       net.Listener
	backend string
	dials   atomic.Int64
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

func newGitFront(t *testing.T, backend string) *gitFront {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &gitFront{l: l, backend: backend, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.accept)
	t.Cleanup(func() {
		l.Close()
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *gitFront) addr() string { return f.l.Addr().String() }

func (f *gitFront) accept() {
	for {
		conn, err := f.l.Accept()
		if err != nil {
			return
		}
		f.dials.Add(1)
		f.wg.Go(func() { f.serve(conn) })
	}
}

// serve passes conn on to the backend, or closes it when the backend is
// down.
func (f *gitFront) serve(conn net.Conn) {
	defer conn.Close()
	back, err := net.DialTimeout("tcp", f.backend, 5*time.Second)
	if err != nil {
		return
	}
	defer back.Close()
	if !f.track(conn, back) {
		return
	}
	defer f.untrack(conn, back)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(back, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, back); done <- struct{}{} }()
	<-done
}

func (f *gitFront) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *gitFront) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		delete(f.conns, c)
	}
}

// gitOutage is how long the git server stays down: 5 minutes with
// RELIABILITY_GIT_OUTAGE=5m (make reliability), 20 s otherwise.
func gitOutage(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("RELIABILITY_GIT_OUTAGE")
	if v == "" {
		return 20 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("RELIABILITY_GIT_OUTAGE=%q: %v", v, err)
	}
	return d
}

// The git server is stopped (its SSH listener closed) for a while. The
// Sync says FetchFailed with the server's address, keeps the last good
// revision (nothing pruned, nothing changed), still reverts hand edits,
// retries no more often than its interval, and applies the commit made
// during the outage once the server is back, without a restart.
func TestGitServerDownKeepsTheClusterAndRecovers(t *testing.T) {
	outage := gitOutage(t)
	interval := max(outage/10, 2*time.Second)
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	front := newGitFront(t, srv.SSHAddr())
	repo := srv.NewRepo(t, "outage")
	names := []string{"a", "b", "c", "d", "e", "f"}
	files := map[string]string{}
	for _, name := range names {
		files[name+".yaml"] = configMapData(name, "v1")
	}
	first := repo.Commit(t, "six ConfigMaps", files)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		Data: map[string][]byte{
			"identity":    srv.DeployKey,
			"known_hosts": []byte(knownhosts.Line([]string{knownhosts.Normalize(front.addr())}, srv.HostKey) + "\n"),
		},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("ssh://git@%s/outage.git", front.addr())
	key := newSync(t, ns, "outage", url, func(s *v1alpha1.Sync) {
		s.Spec.Interval = metav1.Duration{Duration: interval}
		s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git"}
	})
	startInProcessAgent(t, ns, nil)
	testenv.Eventually(t, 2*time.Minute, "the first revision is applied", appliedAt(key, first))
	before := labelledConfigMaps(t, ns, key)

	srv.StopSSH()
	down := time.Now()
	dialsBefore := front.dials.Load()
	during := repo.Commit(t, "made while the server is down", map[string]string{
		"a.yaml": configMapData("a", "v2"),
		"f.yaml": "",
	})
	testenv.Eventually(t, interval+time.Minute, "the Sync reports the fetch failure", func() string {
		s, err := getSync(key)
		if err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Reason != v1alpha1.ReasonFetchFailed || !strings.Contains(ready.Message, front.addr()) {
			return "Ready = " + condString(ready)
		}
		return ""
	})
	s, err := getSync(key)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("while git is down: Ready = %s", condString(meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)))
	if s.Status.LastAppliedRevision != first {
		t.Errorf("lastAppliedRevision = %s, want it kept at %s while git is down", s.Status.LastAppliedRevision, first)
	}

	// Hand edits during the outage, one ConfigMap at a time (so that no
	// object is edited often enough to look like a fight), are reverted.
	edits, reverted := 0, 0
	var worst time.Duration
	for i := 0; time.Since(down) < outage; i++ {
		name := names[i%len(names)]
		edited := time.Now()
		handEdit(t, ns, name, "edited")
		edits++
		testenv.Eventually(t, time.Minute, "the hand edit of "+name+" is reverted while git is down", hasValue(t, ns, name, "v1"))
		reverted++
		worst = max(worst, time.Since(edited))
		next := edited.Add(outage / 8)
		for time.Now().Before(next) && time.Since(down) < outage {
			time.Sleep(100 * time.Millisecond) // the pace of the edits, not a synchronisation
		}
	}
	dials := front.dials.Load() - dialsBefore
	up := time.Since(down)
	if after := labelledConfigMaps(t, ns, key); !slices.Equal(after, before) {
		t.Errorf("the Sync's ConfigMaps after the outage are %v, want %v as before it: nothing pruned", after, before)
	}
	for _, name := range before {
		if got := valueOf(t, ns, name); got != "v1" {
			t.Errorf("ConfigMap %s holds %q after the outage, want v1 (the last good revision)", name, got)
		}
	}
	// One attempt per interval, and a few more for the wake-ups the
	// failure's own status write and events cause: more is hammering.
	bound := int64(up/interval) + 3
	t.Logf("git down %s (Sync interval %s): %d connections to the server (bound %d), %d of %d hand edits reverted, the slowest in %s",
		up.Round(time.Second), interval, dials, bound, reverted, edits, worst.Round(time.Millisecond))
	if dials > bound {
		t.Errorf("%d connections to the git server in %s with a %s interval: more than %d, the retries hammer it", dials, up.Round(time.Second), interval, bound)
	}

	if err := srv.StartSSH(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	testenv.Eventually(t, interval+time.Minute, "the commit made during the outage is applied once the server is back", appliedAt(key, during))
	t.Logf("the server back: the commit made during the outage applied after %s", time.Since(back).Round(time.Millisecond))
	if got := valueOf(t, ns, "a"); got != "v2" {
		t.Errorf("ConfigMap a holds %q, want v2 from the commit made during the outage", got)
	}
	if exists(t, ns, "f") {
		t.Error("ConfigMap f, deleted from git during the outage, was not pruned once the server was back")
	}
}
