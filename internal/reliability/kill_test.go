package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func configMapInWave(name, wave string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  annotations:\n    driftless.dev/wave: %q\ndata:\n  key: v1\n", name, wave)
}

// slowDeployment never becomes healthy on a control plane without a
// controller-manager: the sync waits after its wave until it is killed.
const slowDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: slow
spec:
  replicas: 0
  selector:
    matchLabels: {app: slow}
  template:
    metadata:
      labels: {app: slow}
    spec:
      containers:
      - name: app
        image: nginx:1.27
`

// The agent is SIGKILLed after it wrote the first wave of a revision and
// before it recorded the sync's result; the next revision drops those
// objects. The restarted agent prunes them: the inventory it recorded
// before its first write names them.
func TestAgentKilledMidSyncLosesNothingFromPrune(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "killed")
	first := repo.Commit(t, "the first revision", map[string]string{"base.yaml": configMapInWave("base", "0")})
	key := newSync(t, ns, "killed", repo.FileURL(), nil)
	cache := t.TempDir()
	agent := startAgentProcess(t, ns, cache)
	testenv.Eventually(t, 2*time.Minute, "the first revision is applied", appliedAt(key, first))

	// Wave 0 of the second revision is written, then the sync waits for
	// the Deployment, which never becomes healthy here.
	added := []string{"added-a", "added-b"}
	repo.Commit(t, "add objects in waves", map[string]string{
		"added.yaml": configMapInWave("added-a", "0") + "---\n" + configMapInWave("added-b", "0"),
		"slow.yaml":  slowDeployment,
		"late.yaml":  configMapInWave("late", "1"),
	})
	testenv.Eventually(t, time.Minute, "wave 0 of the second revision is written", func() string {
		for _, name := range added {
			if !exists(t, ns, name) {
				return "ConfigMap " + name + " does not exist yet; agent log:\n" + agent.logTail()
			}
		}
		return ""
	})
	agent.kill()

	third := repo.Commit(t, "drop them again", map[string]string{"added.yaml": "", "slow.yaml": "", "late.yaml": ""})
	agent = startAgentProcess(t, ns, cache)
	testenv.Eventually(t, 2*time.Minute, "the third revision is applied by the restarted agent", appliedAt(key, third))
	for _, name := range added {
		if exists(t, ns, name) {
			t.Errorf("ConfigMap %s, written before the agent was killed and dropped from git since, was not pruned", name)
		}
	}
	var slow appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow"}, &slow); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	} else if err == nil {
		t.Error("Deployment slow, written before the agent was killed and dropped from git since, was not pruned")
	}
	labelled := labelledConfigMaps(t, ns, key)
	s, err := getSync(key)
	if err != nil {
		t.Fatal(err)
	}
	if inv := inventoryIDs(t, s); len(labelled) != 1 || labelled[0] != "base" || len(inv) != 1 {
		t.Errorf("labelled ConfigMaps = %v, inventory = %+v; want only base in both", labelled, inv)
	}
}

func exists(t *testing.T, ns, name string) bool {
	t.Helper()
	var cm corev1.ConfigMap
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
	if err != nil && client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return err == nil
}

func labelledConfigMaps(t *testing.T, ns string, key client.ObjectKey) []string {
	t.Helper()
	var list corev1.ConfigMapList
	if err := c.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{v1alpha1.SyncLabel: key.Namespace + "." + key.Name}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	return names
}
