package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
)

// seedRounds is how many times TestSeedStoryPrunedCustomResourcesStayPruned
// adds and removes a custom resource: the resurrection it guards against
// showed in 2 of 7 single runs of this story.
const seedRounds = 20

// TestSeedStoryPrunedCustomResourcesStayPruned is the field report's story
// as it failed: the agent with Flux v1 flags over file://, a commit that
// removes the file of one custom resource. With the drift watches on, the
// pruned object must stay pruned, round after round.
func TestSeedStoryPrunedCustomResourcesStayPruned(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	group := "seed" + strings.ReplaceAll(ns, "-", "") + ".example.com"
	t.Cleanup(func() {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName("widgets." + group)
		_ = c.Delete(context.Background(), crd)
	})
	crd := testenv.CRDManifest(group, "Widget", "widgets")
	widget := func(i int) string {
		return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w-%d\n  namespace: %s\nspec:\n  size: %d\n", group, i, ns, i)
	}
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	rev := repo.Commit(t, "initial", map[string]string{
		"namespaces/widgets-crd.yaml": crd,
		"workloads/a-config.yaml":     agenttest.ConfigMap(ns, "a-config", "git"),
		"workloads/b-widget-0.yaml":   widget(0),
	})
	o := agenttest.Options(t, env.Config, ns)
	o.GitURL, o.GitBranch, o.GitPaths = repo.FileURL(), "main", []string{"namespaces", "workloads"}
	o.SyncInterval = time.Second
	a := agenttest.Start(t, o)
	root := client.ObjectKey{Namespace: ns, Name: "default"}
	a.Eventually("the first commit is applied", agenttest.AppliedAt(c, root, rev))

	for i := 1; i <= seedRounds; i++ {
		rev = repo.Commit(t, fmt.Sprintf("round %d", i), map[string]string{
			fmt.Sprintf("workloads/b-widget-%d.yaml", i-1): "",
			fmt.Sprintf("workloads/b-widget-%d.yaml", i):   widget(i),
		})
		a.Eventually(fmt.Sprintf("round %d is applied", i), agenttest.AppliedAt(c, root, rev))
		a.Eventually(fmt.Sprintf("round %d: the pruned w-%d is gone", i, i-1), widgetGone(group, ns, fmt.Sprintf("w-%d", i-1)))
	}

	// A hand edit, reverted: every drift check queued before it has run.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a-config"}, &cm); err != nil {
			return err
		}
		cm.Data["greeting"] = "by hand"
		return c.Update(ctx, &cm, client.FieldOwner("kubectl-edit"))
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Eventually("the hand edit is reverted", func() string {
		if v := agenttest.Greeting(t, c, ns, "a-config"); v != "git" {
			return "greeting = " + v
		}
		return ""
	})
	for i := 0; i < seedRounds; i++ {
		if msg := widgetGone(group, ns, fmt.Sprintf("w-%d", i))(); msg != "" {
			t.Errorf("pruned Widget w-%d came back: %s", i, msg)
		}
	}
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Note, "re-created it") {
			t.Errorf("a drift check re-created an object: %s", e.Note)
		}
	}
	if err := a.Stop(); err != nil {
		t.Errorf("the agent did not shut down cleanly: %v", err)
	}
}

// widgetGone checks that the Widget namespace/name does not exist.
func widgetGone(group, namespace, name string) func() string {
	return func() string {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion(group + "/v1")
		w.SetKind("Widget")
		err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, w)
		switch {
		case apierrors.IsNotFound(err):
			return ""
		case err != nil:
			return err.Error()
		}
		return fmt.Sprintf("it exists, written by %v at %s", managersOf(w), w.GetCreationTimestamp().Format("15:04:05.000"))
	}
}

func managersOf(u *unstructured.Unstructured) []string {
	var out []string
	for _, m := range u.GetManagedFields() {
		out = append(out, m.Manager)
	}
	return out
}
