package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/drift"
)

// cartConfig is the shop's ConfigMap of issue #31: git says USD.
const cartConfig = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cart-config\ndata:\n  CURRENCY: USD\n"

// currency reads the cart-config ConfigMap's CURRENCY.
func currency(t *testing.T, ns string) string {
	t.Helper()
	cm := get(t, "v1", "ConfigMap", ns, "cart-config")
	if cm == nil {
		return "<absent>"
	}
	v, _, _ := unstructured.NestedString(cm.Object, "data", "CURRENCY")
	return v
}

// patchCurrency is `kubectl patch cm cart-config --type merge`: a merge
// patch by the field manager kubectl-patch.
func patchCurrency(t *testing.T, ns, value string) {
	t.Helper()
	cm := &unstructured.Unstructured{}
	cm.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	cm.SetNamespace(ns)
	cm.SetName("cart-config")
	body, _ := json.Marshal(map[string]any{"data": map[string]string{"CURRENCY": value}})
	if err := c.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, body), client.FieldOwner("kubectl-patch")); err != nil {
		t.Fatal(err)
	}
}

// setSpec changes the Sync's spec as `driftless suspend`/`resume` or
// kubectl would: a merge patch of the Sync.
func (h *harness) setSpec(name string, mutate func(*v1alpha1.Sync)) {
	h.t.Helper()
	s := h.syncNow(name)
	patch := client.MergeFrom(s.DeepCopy())
	mutate(s)
	if err := c.Patch(context.Background(), s, patch); err != nil {
		h.t.Fatal(err)
	}
}

// The session of issue #31, against the agent and its drift watches: a
// hand edit made while the Sync is suspended is put back when it resumes,
// and the Sync does not say the cluster matches git before it does.
func TestAHandEditMadeWhileSuspendedIsPutBackOnResume(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig, "shop/other.yaml": configMap("other", "v1")})
	// A long interval: only the resume can put it back within the test.
	h.createSync("default", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("default", rev)

	h.setSpec("default", func(s *v1alpha1.Sync) { s.Spec.Suspend = true })
	patchCurrency(t, h.ns, "JPY")
	if got := currency(t, h.ns); got != "JPY" {
		t.Fatalf("CURRENCY = %s while suspended, want the hand edit (JPY) left alone", got)
	}

	h.setSpec("default", func(s *v1alpha1.Sync) { s.Spec.Suspend = false })
	eventually(t, "CURRENCY back to USD after the resume", func() bool { return currency(t, h.ns) == "USD" })
	eventually(t, "the Sync to record the sync that followed the resume", func() bool {
		s := h.syncNow("default")
		return s.Status.ObservedGeneration == s.Generation && s.Status.LastComparedAt != nil
	})
	s := h.syncNow("default")
	drifted := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionDrifted)
	if drifted == nil || drifted.Status != metav1.ConditionFalse || !strings.Contains(drifted.Message, "every live object compared at") {
		t.Errorf("Drifted = %+v, want False saying when every live object was compared", drifted)
	}
}

// A suspend and a resume the agent never saw apart (both made before its
// next reconcile): the sync after them still compares every object and
// puts back a hand edit made in between, which the watches did not report.
func TestASuspendAndResumeTheAgentMissedStillCompareEveryObject(t *testing.T) {
	h := newHarness(t)
	h.r.Watches = deafWatches{}
	rev := h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig, "shop/other.yaml": configMap("other", "v1")})
	h.createSync("default", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	h.expectReady(h.reconcile("default"))
	h.reconcile("default") // the Ready status read back: the next sync trusts the watches

	h.setSpec("default", func(s *v1alpha1.Sync) { s.Spec.Suspend = true })
	patchCurrency(t, h.ns, "JPY")
	h.setSpec("default", func(s *v1alpha1.Sync) { s.Spec.Suspend = false })
	s := h.reconcile("default")
	if got := currency(t, h.ns); got != "USD" {
		t.Fatalf("CURRENCY = %s after the resume's sync, want USD (git): the hand edit made while suspended was not compared", got)
	}
	drifted := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionDrifted)
	if drifted == nil || !strings.HasPrefix(drifted.Message, "the cluster matches "+rev[:7]+": every live object compared at") {
		t.Errorf("Drifted = %+v, want the cluster matches %s: every live object compared at …", drifted, rev[:7])
	}
}

// deafWatches claims to watch every kind and sees nothing: a drift the
// watches missed, which a real watch cannot be made to miss on demand.
type deafWatches struct{}

func (deafWatches) Ensure(context.Context, client.ObjectKey, []schema.GroupVersionKind, time.Time) error {
	return nil
}
func (deafWatches) Covers([]schema.GroupVersionKind) bool         { return true }
func (deafWatches) NotWatched([]schema.GroupVersionKind) []string { return nil }
func (deafWatches) Release(client.ObjectKey)                      {}

// `driftless reconcile` compares every live object, whatever the watches
// say, puts back what differs and says what it put back; an interval that
// trusts the watches never says the cluster matches.
func TestAReconcileRequestComparesEveryObjectAndSaysWhatItPutBack(t *testing.T) {
	h := newHarness(t)
	h.r.Watches = deafWatches{}
	rev := h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig, "shop/other.yaml": configMap("other", "v1")})
	h.createSync("default", nil)
	h.expectReady(h.reconcile("default"))
	h.reconcile("default") // the Ready status read back: the next interval trusts the watches

	patchCurrency(t, h.ns, "JPY")
	s := h.reconcile("default") // an interval: nothing new in git, the watches saw nothing
	if got := currency(t, h.ns); got != "JPY" {
		t.Fatalf("CURRENCY = %s after an interval that compared nothing, want JPY (the test's premise)", got)
	}
	if d := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionDrifted); d != nil && strings.Contains(d.Message, "the cluster matches") &&
		!strings.Contains(d.Message, "compared at") {
		t.Errorf("Drifted says %q without a comparison", d.Message)
	}

	patch := client.MergeFrom(s.DeepCopy())
	s.Annotations = map[string]string{v1alpha1.RequestedAtAnnotation: v1alpha1.FormatRequestedAt(time.Now())}
	if err := c.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
	s = h.reconcile("default")
	if got := currency(t, h.ns); got != "USD" {
		t.Fatalf("CURRENCY = %s after driftless reconcile, want USD (git)", got)
	}
	rec := s.Status.History[0]
	want := "1 reverted: ConfigMap/" + h.ns + "/cart-config data.CURRENCY: JPY → USD (changed by kubectl-patch"
	if rec.Revision != rev || rec.Configured != 1 || !strings.Contains(rec.Message, want) {
		t.Errorf("the recorded sync (what reconcile --wait prints) = %d configured: %q, want 1 configured and %q", rec.Configured, rec.Message, want)
	}
	drifted := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionDrifted)
	if drifted == nil || !strings.HasPrefix(drifted.Message, "the cluster matches "+rev[:7]+": every live object compared at") {
		t.Errorf("Drifted = %+v, want the cluster matches %s: every live object compared at …", drifted, rev[:7])
	}
}

// #24 §4: an apply under the agent's own field manager name is a write
// like any other, and is put back as a kubectl edit is.
func TestAnApplyUnderTheAgentsFieldManagerNameIsReverted(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig})
	h.createSync("default", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("default", rev)

	// kubectl apply --server-side --field-manager=driftless --force-conflicts
	cm := get(t, "v1", "ConfigMap", h.ns, "cart-config")
	applied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cart-config", "namespace": h.ns, "labels": cm.GetLabels(), "annotations": cm.GetAnnotations()},
		"data":     map[string]any{"CURRENCY": "JPY"}}}
	if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner("driftless"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CURRENCY back to USD after an apply named driftless", func() bool { return currency(t, h.ns) == "USD" })
}

// Taking driftless.dev/reconcile: disabled off an object puts back what
// was changed while it was opted out.
func TestRemovingReconcileDisabledPutsTheObjectBack(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig})
	h.createSync("default", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("default", rev)

	annotate := func(value any) {
		t.Helper()
		cm := &unstructured.Unstructured{}
		cm.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
		cm.SetNamespace(h.ns)
		cm.SetName("cart-config")
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.ReconcileAnnotation: value}}})
		if err := c.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, body), client.FieldOwner("kubectl-annotate")); err != nil {
			t.Fatal(err)
		}
	}
	annotate(v1alpha1.Disabled)
	patchCurrency(t, h.ns, "JPY")
	if got := currency(t, h.ns); got != "JPY" {
		t.Fatalf("CURRENCY = %s on an opted-out object, want JPY left alone", got)
	}
	annotate(nil) // kubectl annotate cm cart-config driftless.dev/reconcile-
	eventually(t, "CURRENCY back to USD once the object is opted in again", func() bool { return currency(t, h.ns) == "USD" })
}

// A drift reported while the Sync was a dry run is put back when it is
// switched to Apply.
func TestSwitchingFromDryRunToApplyPutsBackWhatWasReported(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig})
	h.createSync("default", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("default", rev)

	h.setSpec("default", func(s *v1alpha1.Sync) { s.Spec.Mode = v1alpha1.ModeDryRun })
	eventually(t, "the dry run recorded", func() bool {
		s := h.syncNow("default")
		return s.Status.ObservedGeneration == s.Generation
	})
	patchCurrency(t, h.ns, "JPY")
	eventually(t, "the drift reported", func() bool {
		return meta.IsStatusConditionTrue(h.syncNow("default").Status.Conditions, v1alpha1.ConditionDrifted)
	})
	if got := currency(t, h.ns); got != "JPY" {
		t.Fatalf("CURRENCY = %s in DryRun, want JPY left alone", got)
	}
	h.setSpec("default", func(s *v1alpha1.Sync) { s.Spec.Mode = v1alpha1.ModeApply })
	eventually(t, "CURRENCY back to USD after the switch to Apply", func() bool { return currency(t, h.ns) == "USD" })
}

// A drift check that finds a sync writing, or a Sync it cannot act for
// yet, leaves the object to the next sync, which compares it even when it
// would otherwise trust the watches.
func TestAnObjectADriftCheckCouldNotActOnIsComparedByTheNextSync(t *testing.T) {
	h := newHarness(t)
	h.r.Watches = deafWatches{}
	h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig, "shop/other.yaml": configMap("other", "v1")})
	h.createSync("default", nil)
	h.expectReady(h.reconcile("default"))
	h.reconcile("default")

	d := &DriftReconciler{Client: c, Applier: c, Reader: c, Recorder: recorder, Store: h.r.Store}
	key := keyOf(h.ns, "default")
	w := h.r.Store.BeginWrite(key, h.syncNow("default").UID) // a sync is writing
	patchCurrency(t, h.ns, "JPY")
	req := requestFor(h.ns, "default", "cart-config")
	if res, err := d.Reconcile(context.Background(), req); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("the check with the gate held = %+v, %v; want it put back on the queue", res, err)
	}
	w.Release()
	// The queue's retry is lost (the agent stopped, a new leader took
	// over): the next interval compares the object anyway.
	h.reconcile("default")
	if got := currency(t, h.ns); got != "USD" {
		t.Fatalf("CURRENCY = %s after the next interval, want USD: the object a check could not act on was not compared", got)
	}
}

func requestFor(ns, sync, name string) drift.Request {
	return drift.Request{Sync: types.NamespacedName{Namespace: ns, Name: sync}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: ns, Name: name}
}

// The event of the agent's own write can arrive before the write's answer
// is recorded, while the sync still holds the gate: the check leaves the
// object to the next sync. Its retry, once the write is known as the
// agent's, settles it, so the next revision's sync does not read and
// dry-run every object the first sync created (a 1,000-Sync fleet did
// about two per Sync after a push).
func TestTheRetryOfACheckThatMetTheAgentsOwnWriteLeavesNothingToTheNextSync(t *testing.T) {
	h := newHarness(t)
	h.r.Watches = deafWatches{}
	h.repo.Commit(t, "shop", map[string]string{"shop/cart.yaml": cartConfig})
	h.createSync("default", nil)
	h.expectReady(h.reconcile("default"))

	d := &DriftReconciler{Client: c, Applier: c, Reader: c, Recorder: recorder, Store: h.r.Store}
	key := keyOf(h.ns, "default")
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "cart-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	writes := h.r.Store.Writes()
	if !writes.Ours(cm.UID, cm.ResourceVersion) {
		t.Fatalf("the first sync's write of cart-config is not known as the agent's")
	}
	writes.Forget(cm.UID) // its answer not recorded yet
	w := h.r.Store.BeginWrite(key, h.syncNow("default").UID)
	req := requestFor(h.ns, "default", "cart-config")
	if res, err := d.Reconcile(context.Background(), req); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("the check with the gate held = %+v, %v; want it put back on the queue", res, err)
	}
	if !h.r.Store.ToCheck(key)[req.ID()] {
		t.Fatalf("the check with the gate held did not leave cart-config to the next sync")
	}
	writes.Wrote(cm.UID, cm.ResourceVersion) // the answer arrives
	w.Release()
	if _, err := d.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if left := h.r.Store.ToCheck(key); len(left) != 0 {
		t.Fatalf("after the retry found the agent's own write, the next sync still compares %v", left)
	}
}
