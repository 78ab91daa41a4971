package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/drift"
)

// holdsIncidentWriter says whether the Store still holds a writer of
// key's drift incidents.
func (s *Store) holdsIncidentWriter(key client.ObjectKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	return ok && st.incidents != nil
}

func TestADeletedSyncLeavesNoIncidentWriterBehind(t *testing.T) {
	h := newHarness(t)
	rev := h.repo.Commit(t, "initial", map[string]string{"cm.yaml": configMap("web-config", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	agent := startAgent(t, false)
	h.waitReady("fleet", rev)

	cm := get(t, "v1", "ConfigMap", h.ns, "web-config")
	cm.Object["data"] = map[string]any{"key": "edited"}
	if err := c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edit recorded as an incident", func() bool { return len(h.syncNow("fleet").Status.Drift) > 0 })
	key := keyOf(h.ns, "fleet")
	if !agent.Store.holdsIncidentWriter(key) {
		t.Fatal("no incident writer after an incident: the test checks nothing")
	}

	if err := c.Delete(context.Background(), &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Sync gone and its incident writer dropped", func() bool {
		var s v1alpha1.Sync
		err := c.Get(context.Background(), keyOf(h.ns, "fleet"), &s)
		return apierrors.IsNotFound(err) && !agent.Store.holdsIncidentWriter(key)
	})
}

// createIdleSync creates Sync ns/fleet, which no agent syncs: the tests
// drive its reconcilers by hand.
func createIdleSync(t *testing.T, ns string) *v1alpha1.Sync {
	t.Helper()
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: "file:///nowhere", Branch: "main"}},
			Interval: metav1.Duration{Duration: time.Hour}}}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// statusPatchHook returns a client of the test's control plane whose
// status patches first call hook with their number (1, 2, …): it may
// block, panic or fail the patch; nil lets it through.
func statusPatchHook(t *testing.T, hook func(n int) error) client.Client {
	t.Helper()
	direct, err := client.NewWithWatch(agentConfig, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	return interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			mu.Lock()
			n++
			i := n
			mu.Unlock()
			if err := hook(i); err != nil {
				return err
			}
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}

// progress is a wave's progress of a sync of abc1234.
func progress(wave, healthy int) v1alpha1.SyncProgress {
	return v1alpha1.SyncProgress{Revision: "abc1234", Wave: wave, Index: wave + 1, Waves: 2, Healthy: healthy, Total: 2}
}

func TestADriftRecordedDuringAWaveWaitIsNotUndoneByTheProgress(t *testing.T) {
	ns := env.Namespace(t)
	s := createIdleSync(t, ns)
	syncs := &SyncReconciler{Client: agentClient, Reader: agentClient, Store: NewStore()}
	drifts := &DriftReconciler{Client: agentClient, Reader: agentClient, Store: syncs.Store}

	// The sync reports wave 0, then waits for its health (the gate
	// open); a drift left in place is recorded meanwhile, from the Sync
	// as the drift check read it; then the sync reports wave 0 healthy.
	syncs.writeProgress(context.Background(), s, progress(0, 0), 1)
	var read v1alpha1.Sync
	if err := c.Get(context.Background(), keyOf(ns, "fleet"), &read); err != nil {
		t.Fatal(err)
	}
	inc := v1alpha1.DriftIncident{Time: metav1.Now(), Object: "ConfigMap/" + ns + "/web-config", Action: v1alpha1.DriftReported,
		Message: "drift (not reverted: dry run or selfHeal off) data.key: v1 → edited"}
	if err := drifts.recordIncident(context.Background(), &read, inc); err != nil {
		t.Fatal(err)
	}
	syncs.writeProgress(context.Background(), s, progress(0, 1), 1)

	if err := c.Get(context.Background(), keyOf(ns, "fleet"), &read); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(read.Status.Conditions, v1alpha1.ConditionDrifted) || len(read.Status.Drift) != 1 {
		t.Errorf("after the progress: conditions %+v, %d incidents; want Drifted=True and the incident", read.Status.Conditions, len(read.Status.Drift))
	}
	if read.Status.Progress == nil || read.Status.Progress.Healthy != 1 {
		t.Errorf("progress = %+v, want wave 0 with 1 healthy", read.Status.Progress)
	}
}

func TestAnIncidentAfterASyncWroteTheStatusHasAllItsRetries(t *testing.T) {
	ns := env.Namespace(t)
	s := createIdleSync(t, ns)
	// Once armed, the API server answers the first five status patches
	// with a conflict: the one from what the writer kept, which is stale, and
	// as many more as retry.DefaultRetry allows for.
	armed, patches := false, 0
	busy, err := client.NewWithWatch(agentConfig, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	intercepted := interceptor.NewClient(busy, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if armed {
				patches++
				if patches <= 5 {
					return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "syncs"}, obj.GetName(),
						errors.New("the object has been modified"))
				}
			}
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	drifts := &DriftReconciler{Client: intercepted, Reader: agentClient, Store: NewStore()}
	inc := v1alpha1.DriftIncident{Time: metav1.Now(), Object: "ConfigMap/" + ns + "/web-config", Action: v1alpha1.DriftReported,
		Message: "drift (not reverted: dry run or selfHeal off) data.key: v1 → edited"}
	if err := drifts.recordIncident(context.Background(), s, inc); err != nil {
		t.Fatal(err)
	}
	// A sync writes the status: what the writer kept of it is stale.
	syncs := &SyncReconciler{Client: agentClient, Reader: agentClient, Store: drifts.Store}
	syncs.writeProgress(context.Background(), s, progress(0, 0), 1)

	armed = true
	second := inc
	second.Object = "ConfigMap/" + ns + "/other"
	if err := drifts.recordIncident(context.Background(), s, second); err != nil {
		t.Fatalf("the second incident was not recorded: %v", err)
	}
	var read v1alpha1.Sync
	if err := c.Get(context.Background(), keyOf(ns, "fleet"), &read); err != nil {
		t.Fatal(err)
	}
	if len(read.Status.Drift) != 2 {
		t.Errorf("%d incidents recorded, want 2", len(read.Status.Drift))
	}
}

func TestAnIncidentDoesNotWaitForTheWriteOfAnother(t *testing.T) {
	ns := env.Namespace(t)
	s := createIdleSync(t, ns)
	// The first status patch hangs until released, as a slow API server
	// would; later ones go through.
	started, release := make(chan struct{}), make(chan struct{})
	patches := 0
	intercepted := statusPatchHook(t, func(n int) error {
		if patches = n; n == 1 {
			close(started)
			<-release
		}
		return nil
	})
	drifts := &DriftReconciler{Client: intercepted, Reader: agentClient, Store: NewStore()}
	incident := func(name string) v1alpha1.DriftIncident {
		return v1alpha1.DriftIncident{Time: metav1.Now(), Object: "ConfigMap/" + ns + "/" + name, Action: v1alpha1.DriftReverted,
			Message: "reverted data.key: v1 → edited"}
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- drifts.recordIncident(context.Background(), s, incident("one")) }()
	<-started

	// Two more reverts while the first incident is being written: their
	// reconciles go on at once (the revert workers stay free).
	for _, name := range []string{"two", "three"} {
		done := make(chan error, 1)
		go func() { done <- drifts.recordIncident(context.Background(), s, incident(name)) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatalf("recording incident %s waited for the write of another", name)
		}
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	// The writer wrote the two queued incidents after the first, in one
	// patch.
	var read v1alpha1.Sync
	if err := c.Get(context.Background(), keyOf(ns, "fleet"), &read); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range read.Status.Drift {
		got = append(got, d.Object)
	}
	want := []string{"ConfigMap/" + ns + "/three", "ConfigMap/" + ns + "/two", "ConfigMap/" + ns + "/one"}
	if !slices.Equal(got, want) || patches != 2 {
		t.Errorf("status.drift = %v after %d patches, want %v (newest first) after 2", got, patches, want)
	}
}

func TestIncidentsAFailedWriteLeftGoWithTheNextCheckOfTheSyncWhateverItFinds(t *testing.T) {
	ns := env.Namespace(t)
	s := createIdleSync(t, ns)
	// The first status patch panics, the second fails; later ones go
	// through.
	patches := 0
	intercepted := statusPatchHook(t, func(n int) error {
		switch patches = n; n {
		case 1:
			panic("the API server client panicked")
		case 2:
			return apierrors.NewServiceUnavailable("the API server is restarting")
		}
		return nil
	})
	drifts := &DriftReconciler{Client: intercepted, Reader: agentClient, Store: NewStore()}
	inc := v1alpha1.DriftIncident{Time: metav1.Now(), Object: "ConfigMap/" + ns + "/web-config", Action: v1alpha1.DriftReverted,
		Message: "reverted data.key: v1 → edited"}
	func() {
		defer func() { _ = recover() }()
		_ = drifts.recordIncident(context.Background(), s, inc)
	}()
	if err := drifts.recordIncident(context.Background(), s); err == nil {
		t.Fatal("the write after the panic did not run (or did not fail as armed): the writer is stuck")
	}

	// The retry checks an object the Sync no longer has: it returns early,
	// and writes the queue first.
	req := drift.Request{Sync: keyOf(ns, "fleet"), GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: ns, Name: "gone"}
	if _, err := drifts.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var read v1alpha1.Sync
	if err := c.Get(context.Background(), keyOf(ns, "fleet"), &read); err != nil {
		t.Fatal(err)
	}
	if len(read.Status.Drift) != 1 || read.Status.Drift[0].Object != inc.Object {
		t.Errorf("status.drift = %+v after %d patches; want the incident a failed write left", read.Status.Drift, patches)
	}
}
