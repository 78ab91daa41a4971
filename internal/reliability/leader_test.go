package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/testenv"
)

// Leader election timings of the two agents: shorter than the defaults
// (15 s, 10 s, 2 s), so that the test is quick, in the same proportions.
const (
	testLease  = 6 * time.Second
	testRenew  = 4 * time.Second
	testRetry  = time.Second
	failMargin = 15 * time.Second // starting the controllers, a fetch and a sync, on a loaded machine
)

func leaderArgs() []string {
	return []string{"--leader-elect=true",
		"--leader-elect-lease-duration", testLease.String(),
		"--leader-elect-renew-deadline", testRenew.String(),
		"--leader-elect-retry-period", testRetry.String(),
	}
}

// configMapData is a ConfigMap of key: value.
func configMapData(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  key: %s\n", name, value)
}

// valueOf returns the key of ConfigMap ns/name, or "" when it does not
// exist.
func valueOf(t *testing.T, ns, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return cm.Data["key"]
}

// handEdit changes the key of ConfigMap ns/name as the admin would with
// kubectl edit.
func handEdit(t *testing.T, ns, name, value string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, name
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"data":{"key":%q}}`, value))
	if err := c.Patch(context.Background(), cm, patch, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatalf("hand edit of ConfigMap %s: %v", name, err)
	}
}

// hasValue checks that ConfigMap ns/name holds value.
func hasValue(t *testing.T, ns, name, value string) func() string {
	return func() string {
		if got := valueOf(t, ns, name); got != value {
			return fmt.Sprintf("ConfigMap %s holds %q, want %q", name, got, value)
		}
		return ""
	}
}

// objectWrites returns user's writes between from and to to objects in
// namespace ns other than the leader-election Lease and Events: what
// only the leader may do.
func objectWrites(t *testing.T, from, to testenv.AuditMark, user, ns string) []string {
	t.Helper()
	writes, err := env.AuditWrites(from, to, user)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range writes {
		r := w.ObjectRef
		if r.Namespace != ns || r.Resource == "events" || (r.Resource == "leases" && r.APIGroup == "coordination.k8s.io") {
			continue
		}
		out = append(out, w.String())
	}
	return out
}

// Two agents run against one cluster with leader election: only the
// leader writes while commits are synced and a hand edit is reverted.
// The leader is SIGKILLed (so it cannot release the Lease); the standby
// takes over within the lease duration plus a retry and a margin, syncs
// the next commit and reverts a hand edit.
func TestTwoAgentsOneWritesAndTheStandbyTakesOver(t *testing.T) {
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "leader")
	files := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		files[name+".yaml"] = configMapData(name, "v1")
	}
	first := repo.Commit(t, "three ConfigMaps", files)
	key := newSync(t, ns, "leader", repo.FileURL(), nil)

	const userA, userB = "driftless-agent-a", "driftless-agent-b"
	leader := startAgentProcessAs(t, userA, ns, t.TempDir(), leaderArgs()...)
	testenv.Eventually(t, 2*time.Minute, "the first agent leads and applies the first revision", appliedAt(key, first))
	standby := startAgentProcessAs(t, userB, ns, t.TempDir(), leaderArgs()...)
	testenv.Eventually(t, time.Minute, "the second agent waits for the Lease", func() string {
		if log := standby.logTail(); !strings.Contains(log, "Attempting to acquire leader lease") {
			return "the second agent's log does not say it waits for the Lease:\n" + log
		}
		return ""
	})

	from := mark(t)
	second := repo.Commit(t, "change a", map[string]string{"a.yaml": configMapData("a", "v2")})
	testenv.Eventually(t, time.Minute, "the second revision is applied", appliedAt(key, second))
	handEdit(t, ns, "b", "edited")
	testenv.Eventually(t, time.Minute, "the hand edit of b is reverted", hasValue(t, ns, "b", "v1"))
	third := repo.Commit(t, "change b", map[string]string{"b.yaml": configMapData("b", "v3")})
	testenv.Eventually(t, time.Minute, "the third revision is applied", appliedAt(key, third))
	to := mark(t)
	if w := objectWrites(t, from, to, userA, ns); len(w) == 0 {
		t.Errorf("the audit log shows no write by the leader %s, which applied two commits and reverted a hand edit", userA)
	}
	if w := objectWrites(t, from, to, userB, ns); len(w) > 0 {
		t.Errorf("the standby %s wrote while the other agent led:\n%s", userB, strings.Join(w, "\n"))
	}
	holder := leaseHolder(t, ns)

	// The leader dies without releasing the Lease; a commit and a hand
	// edit follow at once.
	leader.kill()
	killed := time.Now()
	fourth := repo.Commit(t, "change c", map[string]string{"c.yaml": configMapData("c", "v4")})
	handEdit(t, ns, "a", "edited")
	var synced, reverted time.Duration
	testenv.Eventually(t, testLease+testRetry+failMargin+30*time.Second, "the standby applies the fourth revision and reverts the hand edit", func() string {
		if reverted == 0 && valueOf(t, ns, "a") == "v2" {
			reverted = time.Since(killed)
		}
		if synced == 0 && appliedAt(key, fourth)() == "" {
			synced = time.Since(killed)
		}
		if synced == 0 || reverted == 0 {
			return fmt.Sprintf("after %s: fourth revision applied after %s, hand edit of a reverted after %s; standby log:\n%s",
				time.Since(killed).Round(time.Millisecond), synced, reverted, standby.logTail())
		}
		return ""
	})
	t.Logf("fail-over with a %s lease, %s retry period: the standby applied a new commit %s after the leader was killed (%.2f × the lease), reverted a hand edit after %s (%.2f × the lease)",
		testLease, testRetry, synced.Round(time.Millisecond), synced.Seconds()/testLease.Seconds(),
		reverted.Round(time.Millisecond), reverted.Seconds()/testLease.Seconds())
	if bound := testLease + testRetry + failMargin; synced > bound {
		t.Errorf("the standby applied the new commit %s after the leader was killed, want within %s (lease + retry + margin)", synced, bound)
	}
	if got := leaseHolder(t, ns); got == holder {
		t.Errorf("the Lease is still held by %s, the killed leader", holder)
	}
	after := mark(t)
	if w := objectWrites(t, to, after, userB, ns); len(w) == 0 {
		t.Errorf("the audit log shows no write by the new leader %s", userB)
	}
	for name, want := range map[string]string{"a": "v2", "b": "v3", "c": "v4"} {
		if got := valueOf(t, ns, name); got != want {
			t.Errorf("ConfigMap %s holds %q, want %q from the fourth revision", name, got, want)
		}
	}
}

// leaseHolder is the holder of the agents' leader-election Lease in ns.
func leaseHolder(t *testing.T, ns string) string {
	t.Helper()
	var lease coordinationv1.Lease
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "driftless-agent"}, &lease); err != nil {
		t.Fatalf("the leader-election Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
