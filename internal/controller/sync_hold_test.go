package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/notify"
)

// hold holds the harness's Sync name at revision, as `driftless hold`
// does, by jane for payment errors.
func (h *harness) hold(name, revision string) {
	h.t.Helper()
	hold := &v1alpha1.Hold{Revision: revision, Reason: "payment errors", By: "jane", At: time.Now()}
	if err := applyHold(keyOf(h.ns, name), hold); err != nil {
		h.t.Fatalf("hold %s at %s: %v", name, revision[:7], err)
	}
}

func (h *harness) release(name string) {
	h.t.Helper()
	if err := applyHold(keyOf(h.ns, name), nil); err != nil {
		h.t.Fatalf("release %s: %v", name, err)
	}
}

// applyHold writes hold (nil: none) as `driftless hold` and `driftless
// release` do: v1alpha1.HoldApply by server-side apply as the hold's
// field manager.
func applyHold(key client.ObjectKey, hold *v1alpha1.Hold) error {
	return c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(v1alpha1.HoldApply(key.Namespace, key.Name, hold, time.Now())),
		client.FieldOwner(v1alpha1.HoldFieldManager), client.ForceOwnership)
}

// configMapData is the value of key in ConfigMap name of ns, "" when
// there is no such ConfigMap.
func configMapData(t *testing.T, ns, name string) string {
	t.Helper()
	u := get(t, "v1", "ConfigMap", ns, name)
	if u == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(u.Object, "data", "key")
	return v
}

// restarted is the harness's reconciler as a new agent process has it:
// nothing in memory, an empty mirror.
func (h *harness) restarted() *SyncReconciler {
	return &SyncReconciler{
		Client: h.r.Client, Reader: h.r.Reader, Applier: h.r.Applier, Identities: h.r.Identities,
		RenderOptions: engine.RenderOptions{Scope: engine.MapperScope{Mapper: c.RESTMapper()}},
		Store:         NewStore(), Recorder: recorder, CacheDir: h.t.TempDir(),
	}
}

func expectHeld(t *testing.T, s *v1alpha1.Sync, revision, tip string, pending int) {
	t.Helper()
	cond := ready(s)
	want := fmt.Sprintf("held at %s claimed by jane: payment errors; %d commit", revision[:7], pending)
	if cond == nil || cond.Status != "True" || cond.Reason != v1alpha1.ReasonHeld || !strings.HasPrefix(cond.Message, want) {
		t.Fatalf("Ready = %+v, want True, reason Held, message starting %q", cond, want)
	}
	if s.Status.LastAppliedRevision != revision {
		t.Errorf("lastAppliedRevision %s, want the held %s", s.Status.LastAppliedRevision, revision[:7])
	}
	if hs := s.Status.Hold; hs == nil || hs.Revision != revision || hs.Tip != tip || hs.Pending != pending || hs.By != "jane (claimed)" || hs.Reason != "payment errors" {
		t.Errorf("status.hold = %+v, want held at %s by jane (claimed: no webhook stamped it), tip %s, %d pending", hs, revision[:7], tip[:7], pending)
	}
	if r := s.Status.History[0]; r.Reason != v1alpha1.ReasonHeld || r.Revision != revision {
		t.Errorf("the newest history record %+v does not say the sync was held at %s", r, revision[:7])
	}
}

// TestAHeldSyncStaysAtTheHeldRevisionUntilReleased is the incident: a bad
// commit is applied; a hold at the commit before it puts the cluster back,
// reverts a hand edit to the held state, keeps new commits out (through an
// agent restart) and says so; a hold outside the branch is refused without
// touching the cluster; release applies the tip.
func TestAHeldSyncStaysAtTheHeldRevisionUntilReleased(t *testing.T) {
	h := newHarness(t)
	good := h.repo.Commit(t, "good", map[string]string{"app.yaml": configMap("app", "good")})
	h.createSync("fleet", nil)
	h.expectReady(h.reconcile("fleet"))
	bad := h.repo.Commit(t, "bad", map[string]string{"app.yaml": configMap("app", "bad")})
	h.expectReady(h.reconcile("fleet"))
	if got := configMapData(t, h.ns, "app"); got != "bad" {
		t.Fatalf("before the hold the cluster holds %q, want the bad commit's", got)
	}

	h.hold("fleet", good)
	s := h.reconcile("fleet")
	expectHeld(t, s, good, bad, 1)
	if got := configMapData(t, h.ns, "app"); got != "good" {
		t.Errorf("held at the good commit, the cluster holds %q", got)
	}
	if !strings.Contains(ready(s).Message, "tip "+bad[:7]) {
		t.Errorf("Ready message %q does not name the tip that waits", ready(s).Message)
	}
	eventsFor(t, h.ns, "fleet", "held at "+good[:7]+" claimed by jane: payment errors")

	// A hand edit is put back to the held revision, not to the tip.
	u := get(t, "v1", "ConfigMap", h.ns, "app")
	_ = unstructured.SetNestedField(u.Object, "hand", "data", "key")
	if err := c.Update(context.Background(), u, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	expectHeld(t, h.reconcile("fleet"), good, bad, 1)
	if got := configMapData(t, h.ns, "app"); got != "good" {
		t.Errorf("after a hand edit of a held Sync the cluster holds %q, want the held revision's good", got)
	}

	// New commits wait; an agent restarted (nothing in memory, an empty
	// mirror) keeps the hold, which is in the object.
	worse := h.repo.Commit(t, "worse", map[string]string{"app.yaml": configMap("app", "worse")})
	h.r = h.restarted()
	expectHeld(t, h.reconcile("fleet"), good, worse, 2)
	if got := configMapData(t, h.ns, "app"); got != "good" {
		t.Errorf("held, after a new commit and a restart the cluster holds %q, want good", got)
	}

	// A revision of another branch is refused; the cluster stays.
	h.repo.Checkout(t, "experiment")
	other := h.repo.Commit(t, "elsewhere", map[string]string{"app.yaml": configMap("app", "elsewhere")})
	h.hold("fleet", other)
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonHoldRefused, other[:7], "not in the history of branch main", "driftless release "+h.ns+"/fleet")
	if !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionStalled) {
		t.Errorf("a refused hold is not Stalled: %+v", s.Status.Conditions)
	}
	if got := configMapData(t, h.ns, "app"); got != "good" {
		t.Errorf("a refused hold changed the cluster to %q, want it left at good", got)
	}

	// Release: the tip, at once.
	h.release("fleet")
	s = h.reconcile("fleet")
	h.expectReady(s)
	if cond := ready(s); cond.Reason != v1alpha1.ReasonSucceeded || s.Status.LastAppliedRevision != worse || s.Status.Hold != nil {
		t.Errorf("released: Ready %+v at %s, status.hold %+v; want Succeeded at the tip %s and no hold", cond, s.Status.LastAppliedRevision[:7], s.Status.Hold, worse[:7])
	}
	if _, held := s.Annotations[v1alpha1.HoldAnnotation]; held {
		t.Errorf("release left the annotation %s", v1alpha1.HoldAnnotation)
	}
	if got := configMapData(t, h.ns, "app"); got != "worse" {
		t.Errorf("released, the cluster holds %q, want the tip's", got)
	}
}

// TestAHoldThatIsNotAHoldSaysWhatToDo: an annotation written by hand that
// is not a hold stalls the Sync, naming it, and changes nothing.
func TestAHoldThatIsNotAHoldSaysWhatToDo(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "good", map[string]string{"app.yaml": configMap("app", "good")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Annotations = map[string]string{v1alpha1.HoldAnnotation: "abc1234"} })
	h.expectFailed(h.reconcile("fleet"), v1alpha1.ReasonHoldRefused, v1alpha1.HoldAnnotation, "is not JSON", "driftless release "+h.ns+"/fleet")
	if got := configMapData(t, h.ns, "app"); got != "" {
		t.Errorf("a Sync with a broken hold applied %q", got)
	}
}

// childSync is a Sync of path app of url into ns, as a parent Sync's git
// holds it, with label as a label.
func childSync(url, ns, label string) string {
	return fmt.Sprintf(`apiVersion: driftless.dev/v1alpha1
kind: Sync
metadata:
  name: child
  labels:
    team: %s
spec:
  interval: 1m
  source:
    git:
      url: %s
      branch: main
  paths: [app]
  targetNamespace: %s
`, label, url, ns)
}

// TestAParentSyncKeepsTheHoldOfTheSyncItApplies: a Sync applied from git
// by a parent Sync is held; the parent applying it again (a change in git,
// a requested full comparison) leaves the hold, which the hold's own field
// manager owns.
func TestAParentSyncKeepsTheHoldOfTheSyncItApplies(t *testing.T) {
	h := newHarness(t)
	good := h.repo.Commit(t, "good", map[string]string{
		"app/app.yaml":      configMap("app", "good"),
		"parent/child.yaml": childSync(h.repo.FileURL(), h.ns, "shop"),
	})
	h.createSync("parent", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"parent"} })
	h.expectReady(h.reconcile("parent"))
	h.expectReady(h.reconcile("child"))
	bad := h.repo.Commit(t, "bad", map[string]string{"app/app.yaml": configMap("app", "bad")})
	h.expectReady(h.reconcile("child"))

	h.hold("child", good)
	expectHeld(t, h.reconcile("child"), good, bad, 1)

	// The parent applies the child again: a change in git, then a full
	// comparison.
	h.repo.Commit(t, "relabel", map[string]string{"parent/child.yaml": childSync(h.repo.FileURL(), h.ns, "payments")})
	h.expectReady(h.reconcile("parent"))
	h.requestSync("parent")
	h.expectReady(h.reconcile("parent"))
	child := h.syncNow("child")
	if child.Labels["team"] != "payments" {
		t.Fatalf("the parent did not apply the child again: labels %v", child.Labels)
	}
	if _, held := child.Annotations[v1alpha1.HoldAnnotation]; !held {
		t.Fatalf("the parent's apply removed the hold: annotations %v", child.Annotations)
	}
	owned := false
	for _, f := range child.ManagedFields {
		if f.Manager == v1alpha1.HoldFieldManager && strings.Contains(f.FieldsV1.GetRawString(), v1alpha1.HoldAnnotation) {
			owned = true
		}
	}
	if !owned {
		t.Errorf("the hold is not owned by the field manager %s", v1alpha1.HoldFieldManager)
	}
	s := h.reconcile("child")
	if got := configMapData(t, h.ns, "app"); got != "good" {
		t.Errorf("after the parent's applies the held child applied %q, want good", got)
	}
	cond := ready(s)
	if cond == nil || cond.Reason != v1alpha1.ReasonHeld {
		t.Errorf("child Ready = %+v, want Held", cond)
	}
}

// TestTheTipOfAHeldSyncsBranchIsMarkedHeld runs the agent with a GitHub
// commit status target: while the Sync is held, the commit that waits
// says held, by whom and why, rather than pending forever.
func TestTheTipOfAHeldSyncsBranchIsMarkedHeld(t *testing.T) {
	var mu sync.Mutex
	statuses := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body notify.StatusBody
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		sha := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		mu.Lock()
		statuses[sha] = append(statuses[sha], body.State+": "+body.Description)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	last := func(sha string) string {
		mu.Lock()
		defer mu.Unlock()
		if s := statuses[sha]; len(s) > 0 {
			return s[len(s)-1]
		}
		return ""
	}

	h := newHarness(t)
	startAgentWithStatuses(t, h, srv.URL)

	good := h.repo.Commit(t, "good", map[string]string{"app.yaml": configMap("app", "good")})
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		s.Annotations = map[string]string{v1alpha1.CommitStatusRepositoryAnnotation: "org/fleet"}
	})
	h.waitReady("fleet", good)
	h.hold("fleet", good)
	eventually(t, "the held Sync Ready with reason Held", func() bool {
		cond := ready(h.syncNow("fleet"))
		return cond != nil && cond.Reason == v1alpha1.ReasonHeld
	})
	waiting := h.repo.Commit(t, "waits", map[string]string{"app.yaml": configMap("app", "new")})
	h.requestSync("fleet")
	want := "pending: held at " + good[:7] + " claimed by jane: payment errors; 1 commit pending (tip " + waiting[:7] + ")"
	eventually(t, "the waiting commit marked held", func() bool { return last(waiting) == want })
	if got := configMapData(t, h.ns, "app"); got != "good" {
		t.Errorf("held, the agent applied %q", got)
	}

	h.release("fleet")
	eventually(t, "the released commit marked success", func() bool { return strings.HasPrefix(last(waiting), "success: Ready: applied "+waiting[:7]) })
}

func TestTheHoldMessageSaysWhereWhoWhyAndWhatWaits(t *testing.T) {
	rev, tip := strings.Repeat("9b", 20), strings.Repeat("4f", 20)
	for _, tc := range []struct {
		pending  int
		verified bool
		want     string
	}{
		{0, true, "held at 9b9b9b9 by jane: payment errors; no commits pending"},
		{1, true, "held at 9b9b9b9 by jane: payment errors; 1 commit pending (tip 4f4f4f4)"},
		{3, true, "held at 9b9b9b9 by jane: payment errors; 3 commits pending (tip 4f4f4f4)"},
		{1, false, "held at 9b9b9b9 claimed by jane: payment errors; 1 commit pending (tip 4f4f4f4)"},
	} {
		h := &held{Hold: v1alpha1.Hold{Revision: rev, By: "jane", Reason: "payment errors", Verified: tc.verified}, tip: tip, pending: tc.pending}
		if got := holdMessage(h); got != tc.want {
			t.Errorf("holdMessage with %d pending = %q, want %q", tc.pending, got, tc.want)
		}
	}
}
