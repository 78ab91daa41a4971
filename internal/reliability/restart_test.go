package reliability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// downtime is how long a stopped component stays down: 10 s in the fast
// subset, 30 s with RELIABILITY_FULL.
func downtime() time.Duration {
	if full() {
		return 30 * time.Second
	}
	return 10 * time.Second
}

func configMaps(prefix string, n int, value string) map[string]string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("%s-%02d.yaml", prefix, i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%02d\ndata:\n  key: %s\n", prefix, i, value)
	}
	return files
}

// outage stops component, keeps it down for downtime and starts it again.
func outage(t *testing.T, component string) {
	t.Helper()
	start := time.Now()
	if err := env.ControlPlane.StopComponent(component); err != nil {
		t.Fatalf("stop %s: %v", component, err)
	}
	time.Sleep(downtime()) // the fault itself, not a synchronisation
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.ControlPlane.StartComponent(ctx, component); err != nil {
		t.Fatalf("start %s again: %v", component, err)
	}
	t.Logf("%s was down for %s", component, time.Since(start).Round(100*time.Millisecond))
}

// heldConfigMap is a ConfigMap in wave whose writes a writeHold holds.
func heldConfigMap(name, wave string) string {
	return strings.Replace(configMapInWave(name, wave), "metadata:\n", "metadata:\n  labels:\n    "+holdLabel+": \"true\"\n", 1)
}

// awaitHeld waits until the hold webhook holds a write of the agent.
func awaitHeld(t *testing.T, held <-chan string, what string) {
	t.Helper()
	select {
	case got := <-held:
		t.Logf("held: %s", got)
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s was not sent within 2 minutes", what)
	}
}

// missingConfigMaps returns which of cm-00 … cm-<n-1> do not exist.
func missingConfigMaps(t *testing.T, ns string, n int) []string {
	t.Helper()
	var missing []string
	for i := range n {
		if name := fmt.Sprintf("cm-%02d", i); !exists(t, ns, name) {
			missing = append(missing, name)
		}
	}
	return missing
}

// equalsRevision checks that the labelled ConfigMaps of the Sync are
// exactly want (name → value), and that its inventory names every one.
func equalsRevision(t *testing.T, ns string, key client.ObjectKey, want map[string]string) {
	t.Helper()
	var list corev1.ConfigMapList
	if err := c.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{v1alpha1.SyncLabel: key.Namespace + "." + key.Name}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cm := range list.Items {
		got[cm.Name] = cm.Data["key"]
	}
	for name, value := range want {
		if got[name] != value {
			t.Errorf("ConfigMap %s = %q, want %q", name, got[name], value)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("ConfigMap %s is labelled but not in the revision", name)
		}
	}
	s, err := getSync(key)
	if err != nil {
		t.Fatal(err)
	}
	inventory := inventoryIDs(t, s)
	for name := range got {
		if !slices.ContainsFunc(inventory, func(id string) bool { return strings.HasSuffix(id, "/"+name) }) {
			t.Errorf("labelled ConfigMap %s is missing from the inventory %v", name, inventory)
		}
	}
}

// The API server crashes in the middle of an apply and of a prune and
// comes back; then etcd restarts. Each time the agent ends with the
// cluster equal to the new revision and an inventory that names every
// object carrying the Sync's label. A webhook holds the agent's write of
// the last wave's object, and later its delete (which the prune sends
// first), until the API server is stopped, so the crash lands mid-sync
// every time.
func TestAPIServerAndEtcdRestartsMidSync(t *testing.T) {
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "restarts")
	first := repo.Commit(t, "one object", map[string]string{"seed.yaml": configMapInWave("seed", "0")})
	key := newSync(t, ns, "restarts", repo.FileURL(), nil)
	hold := newWriteHold(t, ns)
	startInProcessAgent(t, ns, nil)
	testenv.Eventually(t, 2*time.Minute, "the first revision is applied", appliedAt(key, first))

	// Forty objects in wave 0 and a gate in wave 1, whose write is held.
	const n = 40
	files := configMaps("cm", n, "v1")
	files["gate.yaml"] = heldConfigMap("gate", "1")
	held := hold.Arm(admissionv1.Create, admissionv1.Update)
	applied := repo.Commit(t, "forty objects and a gate", files)
	awaitHeld(t, held, "the write of the gate")
	if missing := missingConfigMaps(t, ns, n); len(missing) > 0 || exists(t, ns, "gate") {
		t.Fatalf("while wave 1 is being written: wave 0 lacks %v, gate exists: %v", missing, exists(t, ns, "gate"))
	}
	outage(t, testenv.APIServer)
	hold.Release()
	testenv.Eventually(t, 2*time.Minute, "the apply completes after the API server is back", appliedAt(key, applied))
	want := map[string]string{"seed": "v1", "gate": "v1"}
	for i := range n {
		want[fmt.Sprintf("cm-%02d", i)] = "v1"
	}
	equalsRevision(t, ns, key, want)

	// The next revision drops all forty and the gate: the prune's delete
	// of the gate (wave 1) is held, so the prune has not finished when
	// the API server crashes. (The deletes of wave 0 do not wait for it:
	// the prune sends them without waiting for the answers of wave 1's.)
	drop := map[string]string{}
	for path := range files {
		drop[path] = ""
	}
	held = hold.Arm(admissionv1.Delete)
	pruned := repo.Commit(t, "drop them", drop)
	awaitHeld(t, held, "the delete of the gate")
	t.Logf("while the gate's delete is held, %d of wave 0's %d objects are pruned", len(missingConfigMaps(t, ns, n)), n)
	outage(t, testenv.APIServer)
	hold.Release()
	testenv.Eventually(t, 2*time.Minute, "the prune completes after the API server is back", appliedAt(key, pruned))
	equalsRevision(t, ns, key, map[string]string{"seed": "v1"})

	// etcd restarts between two revisions.
	outage(t, testenv.Etcd)
	after := repo.Commit(t, "after etcd restarted", map[string]string{"seed.yaml": strings.Replace(configMapInWave("seed", "0"), "key: v1", "key: v2", 1)})
	testenv.Eventually(t, 2*time.Minute, "a commit after etcd restarted is applied", appliedAt(key, after))
	equalsRevision(t, ns, key, map[string]string{"seed": "v2"})
}
