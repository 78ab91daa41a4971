package cli

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
	"github.com/driftless/driftless/internal/testenv/apimetrics"
)

// deadSyncs is how many Syncs apply to the dead cluster: more than the
// agent's workers (controller.DefaultConcurrency), so that the test sees
// a worker held by the dead cluster's Syncs.
const deadSyncs = 20

// One agent drives cluster C and cluster B, which is dead in the way that
// hurts most: its address accepts connections and never answers (a
// black-holed or hung API server), so that each request to it waits for
// its time limit. C's Syncs converge and a hand edit in C is reverted
// while deadSyncs Syncs of B fail with ClusterUnreachable; then C's
// drift watches stop when its last Sync goes. The agent runs as
// production runs it: its own ServiceAccount, tenancy on.
func TestADeadClusterDoesNotHoldUpAnotherAndWatchesStopWithTheLastSync(t *testing.T) {
	ctx := context.Background()
	cc, clientC := startCluster(t, "C")
	dead, _ := blackHole(t)

	agentNS := env.Namespace(t)
	ns := env.Namespace(t)
	agentCfg := agentIdentityIn(t, agentNS)
	tenantIn(t, c, ns, "tenant", true)
	mustCreate(t, clientC, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	tenantIn(t, clientC, ns, "tenant", true)
	kubeconfigC := remoteKubeconfig(t, cc, clientC)
	server := strings.TrimPrefix(cc.ControlPlane.APIServerURL, "https://")
	kubeconfigB := strings.Replace(string(kubeconfigC), server, dead, 1)
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-c"},
		Data: map[string][]byte{"value": kubeconfigC}})
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-b"},
		Data: map[string][]byte{"value": []byte(kubeconfigB)}})

	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "configs", map[string]string{
		"apps/config.yaml": agenttest.ConfigMap(ns, "b-config", "v1"),
		"c1/config.yaml":   agenttest.ConfigMap(ns, "c1-config", "v1"),
		"c2/config.yaml":   agenttest.ConfigMap(ns, "c2-config", "v1"),
	})
	watchesBefore := openConfigMapWatches(t, cc)
	agent := agenttest.Start(t, agenttest.Options(t, agentCfg, agentNS))
	agent.Eventually("the CRD is installed", func() string {
		var list v1alpha1.SyncList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		return ""
	})
	var deadKeys []client.ObjectKey
	for i := range deadSyncs {
		s := remoteSync(ns, fmt.Sprintf("b%02d", i), repo.HTTPURL(), "tenant", "cluster-b")
		mustCreate(t, c, s)
		deadKeys = append(deadKeys, client.ObjectKeyFromObject(s))
	}
	var liveKeys []client.ObjectKey
	for _, name := range []string{"c1", "c2"} {
		s := remoteSync(ns, name, repo.HTTPURL(), "tenant", "cluster-c")
		s.Spec.Paths = []string{name}
		mustCreate(t, c, s)
		liveKeys = append(liveKeys, client.ObjectKeyFromObject(s))
	}

	t.Run("C's Syncs converge and a hand edit in C is reverted while B is dead", func(t *testing.T) {
		for _, key := range liveKeys {
			agent.Eventually(key.Name+" is Ready in C", agenttest.AppliedAt(c, key, first))
		}
		var cm corev1.ConfigMap
		if err := clientC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c1-config"}, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["greeting"] = "edited"
		if err := clientC.Update(ctx, &cm, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		agent.Eventually("the hand edit in C is put back", func() string {
			if err := clientC.Get(ctx, client.ObjectKeyFromObject(&cm), &cm); err != nil {
				return err.Error()
			}
			if got := cm.Data["greeting"]; got != "v1" {
				return "greeting in C = " + got
			}
			return ""
		})
	})

	t.Run("B's Syncs say ClusterUnreachable, naming B", func(t *testing.T) {
		for _, key := range deadKeys {
			agent.Eventually(key.Name+" is ClusterUnreachable", remoteSyncRefused(key, v1alpha1.ReasonClusterUnreachable, dead))
		}
		// C's Syncs stayed Ready all along.
		for _, key := range liveKeys {
			var s v1alpha1.Sync
			if err := c.Get(ctx, key, &s); err != nil {
				t.Fatal(err)
			}
			if !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) {
				t.Errorf("%s is not Ready: %+v", key, s.Status.Conditions)
			}
		}
	})

	t.Run("C's drift watches stop when its last Sync goes", func(t *testing.T) {
		if got := openConfigMapWatches(t, cc); got <= watchesBefore {
			t.Fatalf("C has %d open cluster-wide watches of ConfigMaps, as many as before the agent (%d): the test sees no drift watch", got, watchesBefore)
		}
		for _, key := range liveKeys {
			if err := c.Delete(ctx, &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
				t.Fatal(err)
			}
		}
		agent.Eventually("C's drift watches are closed", func() string {
			if got := openConfigMapWatches(t, cc); got != watchesBefore {
				return fmt.Sprintf("C has %d open cluster-wide watches of ConfigMaps, %d before the agent", got, watchesBefore)
			}
			return ""
		})
	})
}

// openConfigMapWatches is how many watches of ConfigMaps in every
// namespace e's API server holds open.
func openConfigMapWatches(t *testing.T, e *testenv.Env) int {
	t.Helper()
	watches, err := apimetrics.OpenWatches(context.Background(), e.Clientset)
	if err != nil {
		t.Fatal(err)
	}
	return watches["configmaps cluster"]
}

// blackHole listens on a loopback port that accepts connections and never
// answers on them, until the test ends; it returns its address and a
// count of the connections it accepted.
func blackHole(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range held {
			conn.Close()
		}
	})
	return ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}
}
