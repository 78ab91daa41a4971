package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/driftless/driftless/api/v1alpha1"
)

// creations records, from a watch on the cluster, the order in which
// objects are created in ns.
func creations(t *testing.T, ns string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watches := []watch.Interface{}
	for _, start := range []func() (watch.Interface, error){
		func() (watch.Interface, error) {
			return env.Clientset.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
		},
		func() (watch.Interface, error) {
			return env.Clientset.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{})
		},
		func() (watch.Interface, error) {
			return env.Clientset.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
		},
	} {
		w, err := start()
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, w)
	}
	events := make(chan string, 100)
	for _, w := range watches {
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added {
					continue
				}
				m, _ := ev.Object.(metav1.Object)
				if m != nil && m.GetName() != "kube-root-ca.crt" {
					// Order by the cluster's own creation order: the
					// resourceVersion at creation.
					events <- fmt.Sprintf("%s %s", m.GetResourceVersion(), m.GetName())
				}
			}
		}()
	}
	return func() []string {
		deadline := time.After(5 * time.Second)
		var got []string
		for {
			select {
			case e := <-events:
				got = append(got, e)
				continue
			case <-deadline:
			case <-time.After(500 * time.Millisecond):
			}
			break
		}
		// Sort by resourceVersion, numerically.
		sortByRV(got)
		var order []string
		for _, g := range got {
			var rv int
			var name string
			fmt.Sscanf(g, "%d %s", &rv, &name)
			order = append(order, name)
		}
		return order
	}
}

func sortByRV(xs []string) {
	rv := func(s string) int {
		var n int
		fmt.Sscanf(s, "%d", &n)
		return n
	}
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && rv(xs[j]) < rv(xs[j-1]); j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}

func waved(doc, wave string) string {
	return doc[:len("apiVersion: v1\nkind: ConfigMap\nmetadata:\n")] +
		"  annotations: {driftless.dev/wave: \"" + wave + "\"}\n" + doc[len("apiVersion: v1\nkind: ConfigMap\nmetadata:\n"):]
}

func TestWavesAndInferredOrderAreTheClustersCreationOrder(t *testing.T) {
	h := newHarness(t)
	web := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {driftless.dev/wave: "2"}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx
        envFrom: [{secretRef: {name: sec}}]
      volumes: [{name: cfg, configMap: {name: cfg}}]
`
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sec\n  annotations: {driftless.dev/wave: \"3\"}\nstringData: {k: v}\n"
	h.repo.Commit(t, "waves", map[string]string{
		"a-web.yaml":    web,
		"b-cfg.yaml":    waved(configMap("cfg", "x"), "5"),
		"c-sec.yaml":    secret,
		"d-first.yaml":  waved(configMap("first", "x"), "0"),
		"e-middle.yaml": waved(configMap("middle", "x"), "1"),
	})
	h.createSync("fleet", nil)
	order := creations(t, h.ns)
	h.expectReady(h.reconcile("fleet"))
	// first is wave 0, middle wave 1; web is wave 2 and pulls up the
	// Secret and the ConfigMap it needs (waves 3 and 5) to be applied
	// before it. The Secret and the ConfigMap do not need each other:
	// either may be created first. (The Deployment is last: with no
	// controller-manager in this control plane it never becomes healthy.)
	got := order()
	if len(got) == 5 && got[2] == "cfg" && got[3] == "sec" {
		got[2], got[3] = got[3], got[2]
	}
	want := []string{"first", "middle", "sec", "cfg", "web"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("creation order, the Secret and the ConfigMap in either order (-want +got):\n%s", diff)
	}
}

func TestDependsOnWaitsForTheDependencyAndFindsCycles(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "two", map[string]string{
		"base/cm.yaml": configMap("base", "x"),
		"apps/cm.yaml": configMap("app", "x"),
	})
	h.createSync("apps", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"apps"}
		s.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "base"}}
	})
	h.createSync("base", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"base"} })

	s := h.reconcile("apps")
	h.expectFailed(s, v1alpha1.ReasonDependencyNotReady, h.ns+"/base")
	if get(t, "v1", "ConfigMap", h.ns, "app") != nil {
		t.Error("a Sync applied before its dependency was Ready")
	}
	h.expectReady(h.reconcile("base"))
	s = h.reconcile("apps")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != rev {
		t.Errorf("apps at %s, want %s", s.Status.LastAppliedRevision, rev)
	}

	// base → apps → base is a cycle.
	var base v1alpha1.Sync
	if err := c.Get(context.Background(), keyOf(h.ns, "base"), &base); err != nil {
		t.Fatal(err)
	}
	base.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "apps"}}
	if err := c.Update(context.Background(), &base); err != nil {
		t.Fatal(err)
	}
	s = h.reconcile("base")
	h.expectFailed(s, v1alpha1.ReasonDependencyCycle, h.ns+"/base → "+h.ns+"/apps → "+h.ns+"/base")
}
