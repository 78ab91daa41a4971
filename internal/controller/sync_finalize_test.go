package controller

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// deleteSync deletes the named Sync and reconciles it once, as the
// controller does when the deletion is seen. It returns the reconcile's
// result and the Sync, or nil once it is gone.
func (h *harness) deleteSync(name string) (ctrl.Result, *v1alpha1.Sync) {
	h.t.Helper()
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	if err := c.Delete(context.Background(), s); err != nil {
		h.t.Fatalf("delete Sync: %v", err)
	}
	return h.reconcileDeleted(name)
}

// reconcileDeleted reconciles the named Sync once and returns the result
// and the Sync, or nil when it is gone.
func (h *harness) reconcileDeleted(name string) (ctrl.Result, *v1alpha1.Sync) {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: keyOf(h.ns, name)})
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), keyOf(h.ns, name), &s); err != nil {
		if apierrors.IsNotFound(err) {
			return res, nil
		}
		h.t.Fatal(err)
	}
	return res, &s
}

// syncLabel returns the driftless.dev/sync label of a ConfigMap of the
// harness's namespace; it fails the test when the ConfigMap is gone.
func (h *harness) syncLabel(name string) (string, bool) {
	h.t.Helper()
	cm := get(h.t, "v1", "ConfigMap", h.ns, name)
	if cm == nil {
		h.t.Fatalf("ConfigMap %s is gone; it must stay", name)
	}
	v, ok := cm.GetLabels()[v1alpha1.SyncLabel]
	return v, ok
}

func TestDeletionPolicyOrphanKeepsTheObjectsAndRemovesTheirLabel(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "initial", map[string]string{
		"app.yaml":    deployment(h.ns, "web", "512Mi"),
		"config.yaml": configMap("web-config", "v1"),
		"taken.yaml":  configMap("taken", "v1"),
	})
	h.createSync("fleet", nil)
	s := h.reconcile("fleet")
	h.expectReady(s)
	if !slices.Contains(s.Finalizers, v1alpha1.Finalizer) {
		t.Fatalf("finalizers = %v after the first sync, want %s", s.Finalizers, v1alpha1.Finalizer)
	}
	if s.Spec.DeletionPolicy != v1alpha1.DeletionOrphan {
		t.Errorf("spec.deletionPolicy = %q, want the default Orphan", s.Spec.DeletionPolicy)
	}
	// Another Sync has taken "taken" over since: its label is not ours
	// to remove.
	taken := get(t, "v1", "ConfigMap", h.ns, "taken")
	labels := taken.GetLabels()
	labels[v1alpha1.SyncLabel] = "other.owner"
	taken.SetLabels(labels)
	if err := c.Update(context.Background(), taken); err != nil {
		t.Fatal(err)
	}

	if _, gone := h.deleteSync("fleet"); gone != nil {
		t.Fatalf("the Sync is still there after its cleanup: finalizers %v", gone.Finalizers)
	}
	if v, ok := h.syncLabel("web-config"); ok {
		t.Errorf("ConfigMap web-config keeps %s=%s, pointing at a deleted Sync", v1alpha1.SyncLabel, v)
	}
	web := get(t, "apps/v1", "Deployment", h.ns, "web")
	if web == nil {
		t.Fatal("Deployment web was deleted; Orphan keeps objects")
	}
	if v, ok := web.GetLabels()[v1alpha1.SyncLabel]; ok {
		t.Errorf("Deployment web keeps %s=%s", v1alpha1.SyncLabel, v)
	}
	if v, _ := h.syncLabel("taken"); v != "other.owner" {
		t.Errorf("ConfigMap taken has %s=%q, want other.owner's label left alone", v1alpha1.SyncLabel, v)
	}
	eventsFor(t, h.ns, "fleet", "Sync deleted (deletionPolicy Orphan); removed the driftless.dev/sync label from 2 objects, which stay: ")
}

func TestDeletionPolicyDeleteDeletesTheObjects(t *testing.T) {
	keep := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  annotations:\n    driftless.dev/prune: disabled\ndata: {k: v}\n"
	tests := []struct {
		name    string
		suspend bool
		dryRun  bool
		// deleted: web and web-config are gone; else they stay, with
		// their label when labelled.
		deleted, labelled bool
		event             string
	}{
		{
			name: "deletes everything but what opted out of prune", deleted: true,
			event: "Sync deleted (deletionPolicy Delete); deleted 2 objects: ",
		},
		{
			name: "a suspended Sync orphans instead", suspend: true,
			event: "it was suspended, so its objects are orphaned whatever spec.deletionPolicy says",
		},
		{
			name: "under the agent's --dry-run nothing is written", dryRun: true, labelled: true,
			event: "dry run, nothing written: Sync deleted (deletionPolicy Delete); would have deleted 2 objects",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.repo.Commit(t, "initial", map[string]string{
				"app.yaml":    deployment(h.ns, "web", "512Mi"),
				"config.yaml": configMap("web-config", "v1"),
				"keep.yaml":   keep,
			})
			h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.DeletionPolicy = v1alpha1.DeletionDelete })
			h.expectReady(h.reconcile("fleet"))
			if tt.suspend {
				var s v1alpha1.Sync
				if err := c.Get(context.Background(), keyOf(h.ns, "fleet"), &s); err != nil {
					t.Fatal(err)
				}
				s.Spec.Suspend = true
				if err := c.Update(context.Background(), &s); err != nil {
					t.Fatal(err)
				}
			}
			h.r.DryRun = tt.dryRun

			if _, gone := h.deleteSync("fleet"); gone != nil {
				t.Fatalf("the Sync is still there after its cleanup: finalizers %v", gone.Finalizers)
			}
			web, cm := get(t, "apps/v1", "Deployment", h.ns, "web"), get(t, "v1", "ConfigMap", h.ns, "web-config")
			for _, obj := range []*unstructured.Unstructured{web, cm} {
				if tt.deleted {
					if obj != nil && obj.GetDeletionTimestamp() == nil {
						t.Errorf("%s %s is still there; deletionPolicy Delete deletes it", obj.GetKind(), obj.GetName())
					}
					continue
				}
				if obj == nil {
					t.Fatalf("an object was deleted; want both kept")
				}
				if _, ok := obj.GetLabels()[v1alpha1.SyncLabel]; ok != tt.labelled {
					t.Errorf("%s %s labelled = %v, want %v", obj.GetKind(), obj.GetName(), ok, tt.labelled)
				}
			}
			if _, ok := h.syncLabel("keep"); ok != tt.labelled {
				t.Errorf("ConfigMap keep (prune: disabled) labelled = %v, want %v", ok, tt.labelled)
			}
			eventsFor(t, h.ns, "fleet", tt.event)
		})
	}
}

// refuseDeletes makes the API server refuse every deletion of the
// ConfigMap name in namespace, with a ValidatingAdmissionPolicy, and
// waits until it does.
func refuseDeletes(t *testing.T, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	policyName := "refuse-delete-" + namespace
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "oldObject.metadata.name != '" + name + "'",
				Message:    "protected by the test",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	// The policy is loaded asynchronously: probe it with a dry-run delete.
	cm := get(t, "v1", "ConfigMap", namespace, name)
	testenv.Eventually(t, 30*time.Second, "the ValidatingAdmissionPolicy in effect", func() string {
		if c.Delete(ctx, cm, client.DryRunAll) == nil {
			return "a dry-run delete is still allowed"
		}
		return ""
	})
}

func TestSyncStuckOnAFailingPruneCanStillBeDeleted(t *testing.T) {
	tests := []struct {
		name   string
		policy v1alpha1.DeletionPolicy
		// giveUp makes a Sync stuck on the refused deletion go.
		giveUp func(h *harness, s *v1alpha1.Sync)
	}{
		{
			name:   "Orphan unlabels the object whose prune fails and goes",
			policy: v1alpha1.DeletionOrphan,
		},
		{
			name:   "Delete waits, then goes when annotated force-delete",
			policy: v1alpha1.DeletionDelete,
			giveUp: func(h *harness, s *v1alpha1.Sync) {
				s.Annotations = map[string]string{v1alpha1.ForceDeleteAnnotation: v1alpha1.Enabled}
				if err := c.Update(context.Background(), s); err != nil {
					h.t.Fatal(err)
				}
			},
		},
		{
			name:   "Delete waits, then goes when spec.timeout has passed since the deletion",
			policy: v1alpha1.DeletionDelete,
			giveUp: func(h *harness, s *v1alpha1.Sync) {
				later := s.DeletionTimestamp.Add(s.Spec.Timeout.Duration + time.Second)
				h.r.Now = func() time.Time { return later }
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.repo.Commit(t, "initial", map[string]string{
				"a.yaml":         configMap("a", "v1"),
				"protected.yaml": configMap("protected", "v1"),
			})
			h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.DeletionPolicy = tt.policy })
			h.expectReady(h.reconcile("fleet"))
			refuseDeletes(t, h.ns, "protected")
			h.repo.Commit(t, "remove protected", map[string]string{"protected.yaml": ""})
			h.expectFailed(h.reconcile("fleet"), v1alpha1.ReasonPruneFailed, "protected by the test")

			res, s := h.deleteSync("fleet")
			if tt.giveUp != nil {
				if s == nil {
					t.Fatal("the Sync went at once although an object could not be deleted; want it to wait and retry")
				}
				if res.RequeueAfter <= 0 || res.RequeueAfter > finalizeRetry {
					t.Errorf("reconcile asked for %+v; want a retry within %s", res, finalizeRetry)
				}
				eventsFor(t, h.ns, "fleet", "deletionPolicy Delete: 1 object could not be deleted: ConfigMap/"+h.ns+"/protected")
				eventsFor(t, h.ns, "fleet", "annotate it driftless.dev/force-delete=enabled")
				if get(t, "v1", "ConfigMap", h.ns, "a") != nil {
					t.Errorf("ConfigMap a is still there; its deletion was not refused")
				}
				tt.giveUp(h, s)
				_, s = h.reconcileDeleted("fleet")
				eventsFor(t, h.ns, "fleet", "leaving behind 1 object: ConfigMap/"+h.ns+"/protected (label removed): ")
			}
			if s != nil {
				t.Fatalf("the Sync is still there: finalizers %v", s.Finalizers)
			}
			if v, ok := h.syncLabel("protected"); ok {
				t.Errorf("ConfigMap protected, left behind, keeps %s=%s pointing at a deleted Sync", v1alpha1.SyncLabel, v)
			}
			if tt.policy == v1alpha1.DeletionOrphan {
				const orphaned = "Sync deleted (deletionPolicy Orphan)"
				for _, note := range eventsFor(t, h.ns, "fleet", orphaned) {
					if strings.HasPrefix(note, orphaned) && !strings.Contains(note, "ConfigMap/"+h.ns+"/protected") {
						t.Errorf("the event does not name ConfigMap protected: %s", note)
					}
				}
			}
		})
	}
}

// A new Sync's finalizer is added while its first sync resolves, renders
// and validates, and is in before anything is written: the agent's patch
// of the Sync is held until the Sync's objects are dry-run (before, the
// sync waited for the patch's answer to begin, a round trip more on every
// new Sync's way to Ready), and no write leaves the agent until the
// patch is answered.
func TestANewSyncsFinalizerIsAddedWhileItsFirstSyncValidates(t *testing.T) {
	h := newHarness(t)
	revision := h.repo.Commit(t, "an app", map[string]string{"app/web.yaml": configMap("web", "v1") + "---\n" + deployment(h.ns, "web", "64Mi")})
	dryRun := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	heldUntilDryRun, answered := false, false
	var early []string // writes sent before the finalizer's patch was answered
	_, stop := startStoppableAgentWrapped(t, func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			key, ok := requestKey(req, h.ns)
			switch {
			case !ok:
			case key.Verb == http.MethodPatch && key.Resource == "syncs":
				select {
				case <-dryRun:
					mu.Lock()
					heldUntilDryRun = true
					mu.Unlock()
				case <-time.After(20 * time.Second):
				}
				resp, err := rt.RoundTrip(req)
				mu.Lock()
				answered = true
				mu.Unlock()
				return resp, err
			case strings.HasSuffix(key.Verb, " dry-run"):
				once.Do(func() { close(dryRun) })
			case key.Verb != http.MethodGet && key.Verb != "LIST" && key.Verb != "WATCH":
				mu.Lock()
				if !answered {
					early = append(early, key.Verb+" "+key.Resource)
				}
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	h.waitReady("shop", revision)
	stop()

	mu.Lock()
	defer mu.Unlock()
	if !heldUntilDryRun {
		t.Errorf("the Sync's objects were not dry-run while its finalizer's patch was held for 20 s: the first sync waited for the patch")
	}
	if len(early) > 0 {
		t.Errorf("written before the finalizer's patch was answered: %v", early)
	}
	if s := h.syncNow("shop"); !slices.Contains(s.Finalizers, v1alpha1.Finalizer) {
		t.Errorf("the Sync's finalizers are %v, want %s", s.Finalizers, v1alpha1.Finalizer)
	}
}

// A new Sync whose finalizer's patch fails (the Sync changed between the
// agent's read and its patch: a 409) writes nothing: no object, no
// status, and its objects are not even dry-run once the patch is known
// to have failed (a conflict on a Sync of 10,000 objects would cost
// 10,000 dry runs). The retry adds the finalizer and syncs.
func TestANewSyncWhoseFinalizerPatchConflictsWritesNothingUntilItIsIn(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "an app", map[string]string{"app/web.yaml": configMap("web", "v1") + "---\n" + configMap("api", "v1")})
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })

	// Every request the Sync's identity sends that writes or dry-runs.
	var mu sync.Mutex
	var sent []string
	cfg := rest.CopyConfig(agentConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/apis/authorization.k8s.io/") {
				mu.Lock()
				sent = append(sent, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	h.r.Identities = NewIdentities(testTenancy(), agentClient, cfg, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})

	// The first patch of the Sync conflicts: the Sync is changed just
	// before it is sent. The sync's read of its Inventory, after its
	// render and before its dry runs, waits for the patch's answer.
	patched := make(chan struct{})
	var statusPatches int
	first := true
	direct, err := client.NewWithWatch(agentConfig, client.Options{Scheme: scheme, Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	h.r.Client = interceptor.NewClient(direct, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*v1alpha1.Sync); !ok || !first {
				return cl.Patch(ctx, obj, patch, opts...)
			}
			first = false
			defer close(patched)
			var s v1alpha1.Sync
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &s); err != nil {
				return err
			}
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, "example.com/touched", "by someone else")
			if err := c.Update(ctx, &s); err != nil {
				return err
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.Sync); !ok {
				select {
				case <-patched:
				case <-time.After(20 * time.Second):
					t.Error("the finalizer's patch was not answered in 20 s")
				}
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusPatches++
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})

	_, err = h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: h.ns, Name: "shop"}})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "add finalizer "+v1alpha1.Finalizer) {
		t.Fatalf("reconcile: %v; want the finalizer's conflict", err)
	}
	mu.Lock()
	if len(sent) > 0 {
		t.Errorf("after the finalizer's patch failed, the sync sent %d requests that write or dry-run: %v", len(sent), sent)
	}
	mu.Unlock()
	if statusPatches > 0 {
		t.Errorf("the status was patched %d times without the finalizer", statusPatches)
	}
	if get(t, "v1", "ConfigMap", h.ns, "web") != nil {
		t.Error("ConfigMap web was written without the finalizer")
	}

	s := h.reconcile("shop")
	if !slices.Contains(s.Finalizers, v1alpha1.Finalizer) {
		t.Errorf("the Sync's finalizers are %v after the retry, want %s", s.Finalizers, v1alpha1.Finalizer)
	}
	h.expectReady(s)
}
