package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// startAgent runs the Sync and drift controllers in a manager, as the
// agent does, until the test ends. One worker each, so that events are
// handled in the order they happen.
func startAgent(t *testing.T, dryRun bool) *SyncReconciler {
	t.Helper()
	return startAgentWith(t, func(o *Options) { o.DryRun = dryRun })
}

// startAgentWith is startAgent with options changed by mutate. It
// returns the agent's Sync reconciler.
//
// It builds the manager itself, not with agenttest: internal/agent imports
// this package, so this package's tests cannot import it, and they read
// the reconciler's Store.
func startAgentWith(t *testing.T, mutate func(*Options)) *SyncReconciler {
	t.Helper()
	mgr := newAgentManager(t)
	opts := DefaultOptions()
	opts.CacheDir, opts.Concurrency = t.TempDir(), 1
	opts.Tenancy = ptr.To(testTenancy())
	mutate(&opts)
	syncs, err := Setup(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)
	return syncs
}

// newAgentManager makes a manager as production runs it: the agent's
// own identity, its cache options.
func newAgentManager(t *testing.T) ctrl.Manager {
	t.Helper()
	return newAgentManagerFor(t, agentConfig)
}

// newAgentManagerFor is newAgentManager with cfg, the agent's identity
// (with a transport of the test's own, say).
func newAgentManagerFor(t *testing.T, cfg *rest.Config) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Cache:      CacheOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// runManager starts mgr until the test ends.
func runManager(t *testing.T, mgr ctrl.Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// eventually polls cond until it returns true or 30 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
}

func (h *harness) syncNow(name string) *v1alpha1.Sync {
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: name}, &s); err != nil {
		h.t.Fatal(err)
	}
	return &s
}

func (h *harness) waitReady(name, revision string) {
	h.t.Helper()
	eventually(h.t, "Sync "+name+" Ready at "+revision[:7], func() bool {
		s := h.syncNow(name)
		cond := ready(s)
		return cond != nil && cond.Status == metav1.ConditionTrue && s.Status.LastAppliedRevision == revision
	})
}

// edit changes a Deployment's memory limit (and lets more change it) as
// kubectl edit would: a full update with field manager kubectl-edit.
func edit(t *testing.T, ns, name, memory string, more func(*unstructured.Unstructured)) {
	t.Helper()
	live := get(t, "apps/v1", "Deployment", ns, name)
	containers, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
	_ = unstructured.SetNestedField(containers[0].(map[string]any), memory, "resources", "limits", "memory")
	_ = unstructured.SetNestedSlice(live.Object, containers, "spec", "template", "spec", "containers")
	if more != nil {
		more(live)
	}
	if err := c.Update(context.Background(), live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
}

func objectEvents(t *testing.T, ns, kind, name string) []string {
	var list corev1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			notes = append(notes, e.Message)
		}
	}
	return notes
}

func TestKubectlEditIsRevertedAtOnceAndExplained(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "initial", map[string]string{
		"workloads/app.yaml": deployment(h.ns, "web", "512Mi"),
		"workloads/cm.yaml":  configMap("web-config", "v1"),
	})
	// A long interval: only the watch can revert within the test.
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("fleet", rev)

	// One edit changes a field git sets and adds one git does not set.
	edit(t, h.ns, "web", "1Gi", func(u *unstructured.Unstructured) {
		ann := u.GetAnnotations()
		ann["team.example.com/owner"] = "alice"
		u.SetAnnotations(ann)
	})
	eventually(t, "the memory limit reverted to 512Mi", func() bool {
		return memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "web")) == "512Mi"
	})
	if got := get(t, "apps/v1", "Deployment", h.ns, "web").GetAnnotations()["team.example.com/owner"]; got != "alice" {
		t.Errorf("an annotation git does not set was touched: %q", got)
	}
	want := "reverted spec.template.spec.containers[app].resources.limits.memory: 1Gi → 512Mi (changed by kubectl-edit at "
	eventually(t, "an Event on the Deployment explaining the revert", func() bool {
		for _, n := range objectEvents(t, h.ns, "Deployment", "web") {
			if strings.Contains(n, want) && strings.Contains(n, "change it in git: workloads/app.yaml") {
				return true
			}
		}
		return false
	})
	s := h.syncNow("fleet")
	if len(s.Status.Drift) == 0 || s.Status.Drift[0].Action != v1alpha1.DriftReverted ||
		len(s.Status.Drift[0].Fields) != 1 || s.Status.Drift[0].Fields[0].Manager != "kubectl-edit" {
		t.Errorf("status.drift = %+v, want a Reverted incident naming kubectl-edit", s.Status.Drift)
	}
	// The incident is written as a patch of status.drift alone: the rest
	// of the status is as the sync left it.
	if len(listed(t, s)) != 2 || s.Status.InventoryRef == nil || s.Status.InventoryRef.Entries != 2 ||
		len(s.Status.History) != 1 || !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("after the incident: %d inventory entries (status counts %+v), %d sync records, conditions %+v; want 2, 1 and Ready",
			len(listed(t, s)), s.Status.InventoryRef, len(s.Status.History), s.Status.Conditions)
	}

	// A deleted ConfigMap comes back.
	cm := get(t, "v1", "ConfigMap", h.ns, "web-config")
	if err := c.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted ConfigMap re-created", func() bool {
		got := get(t, "v1", "ConfigMap", h.ns, "web-config")
		return got != nil && got.GetUID() != cm.GetUID()
	})
}

func TestOptOutsAreHonoured(t *testing.T) {
	h := newHarness(t)
	ignoring := strings.Replace(deployment(h.ns, "scaled", "512Mi"), "  namespace: "+h.ns+"\n",
		"  namespace: "+h.ns+"\n  annotations:\n    driftless.dev/ignore-fields: /spec/replicas\n", 1)
	rev := h.repo.Commit(t, "initial", map[string]string{
		"left.yaml":    deployment(h.ns, "left-alone", "512Mi"),
		"scaled.yaml":  ignoring,
		"barrier.yaml": deployment(h.ns, "barrier", "512Mi"),
	})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("fleet", rev)

	// reconcile: disabled, set in the cluster, then edited.
	edit(t, h.ns, "left-alone", "2Gi", func(u *unstructured.Unstructured) {
		ann := u.GetAnnotations()
		ann[v1alpha1.ReconcileAnnotation] = v1alpha1.Disabled
		u.SetAnnotations(ann)
	})
	// An ignored field changed by an autoscaler.
	scaled := get(t, "apps/v1", "Deployment", h.ns, "scaled")
	_ = unstructured.SetNestedField(scaled.Object, int64(3), "spec", "replicas")
	if err := c.Update(context.Background(), scaled, client.FieldOwner("horizontal-pod-autoscaler")); err != nil {
		t.Fatal(err)
	}
	// With one worker, the barrier's revert comes after both checks.
	edit(t, h.ns, "barrier", "3Gi", nil)
	eventually(t, "the barrier reverted", func() bool {
		return memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "barrier")) == "512Mi"
	})
	if got := memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "left-alone")); got != "2Gi" {
		t.Errorf("object with reconcile: disabled was reverted to %s", got)
	}
	if r, _, _ := unstructured.NestedInt64(get(t, "apps/v1", "Deployment", h.ns, "scaled").Object, "spec", "replicas"); r != 3 {
		t.Errorf("ignored field spec.replicas = %d, want the autoscaler's 3", r)
	}
}

func TestDryRunWritesNothingAndReports(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "initial", map[string]string{"cm.yaml": configMap("web-config", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Mode = v1alpha1.ModeDryRun })
	startAgent(t, false)
	eventually(t, "a dry-run report", func() bool {
		s := h.syncNow("fleet")
		cond := ready(s)
		return cond != nil && s.Status.LastAttemptedRevision == rev && strings.Contains(cond.Message, "would create ConfigMap/"+h.ns+"/web-config")
	})
	if get(t, "v1", "ConfigMap", h.ns, "web-config") != nil {
		t.Fatal("a DryRun Sync created an object")
	}
	s := h.syncNow("fleet")
	var drifted *metav1.Condition
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == v1alpha1.ConditionDrifted {
			drifted = &s.Status.Conditions[i]
		}
	}
	if drifted == nil || drifted.Status != metav1.ConditionTrue {
		t.Errorf("Drifted = %+v, want True", drifted)
	}
	if inv := listed(t, s); s.Status.LastAppliedRevision != "" || len(inv) != 0 || s.Status.InventoryRef != nil {
		t.Errorf("a dry run recorded an applied revision or inventory: %q, %v, %+v", s.Status.LastAppliedRevision, inv, s.Status.InventoryRef)
	}
}

func TestFightingWritersGetABackOffNotALoop(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "initial", map[string]string{"app.yaml": deployment(h.ns, "web", "512Mi")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("fleet", rev)

	// Another controller insists on 1Gi: each time it sees 512Mi, it
	// sets 1Gi again, at most 10 times.
	flips := 0
	paused := func() bool {
		for _, inc := range h.syncNow("fleet").Status.Drift {
			if inc.Action == v1alpha1.DriftPaused {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(45 * time.Second)
	for !paused() && flips < 10 && time.Now().Before(deadline) {
		if memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "web")) == "512Mi" {
			edit(t, h.ns, "web", "1Gi", nil)
			flips++
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !paused() {
		t.Fatalf("after %d flips driftless did not pause: status.drift = %+v", flips, h.syncNow("fleet").Status.Drift)
	}
	reverted := 0
	for _, inc := range h.syncNow("fleet").Status.Drift {
		if inc.Action == v1alpha1.DriftReverted {
			reverted++
		}
	}
	if reverted > 3 {
		t.Errorf("driftless reverted %d times before pausing, want at most 3", reverted)
	}
	eventsFor(t, h.ns, "fleet", "another writer keeps changing it")
	if v, _ := metricValue(t, "driftless_drift_fights_total", map[string]string{"sync": h.ns + "/fleet", "kind": "Deployment", "manager": "kubectl-edit"}); v < 1 {
		t.Errorf("driftless_drift_fights_total for kubectl-edit = %v, want at least 1", v)
	}
}
