package controller

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/testenv/apimetrics"
)

// restartObjects is how many objects the restart tests' Sync manages:
// enough that a comparison of each stands out from the constant
// requests of a start.
const restartObjects = 40

// syncedThenStopped commits restartObjects ConfigMaps and Deployments,
// lets an agent sync them (Sync shop of the harness's namespace) and
// stops it; it returns the harness and the revision.
func syncedThenStopped(t *testing.T) (*harness, string) {
	h := newHarness(t)
	files := map[string]string{}
	for i := range restartObjects - 2 {
		files[fmt.Sprintf("app/cm-%02d.yaml", i)] = configMap(fmt.Sprintf("cm-%02d", i), "v1")
	}
	files["app/web.yaml"] = deployment(h.ns, "web", "64Mi")
	files["app/api.yaml"] = deployment(h.ns, "api", "64Mi")
	revision := h.repo.Commit(h.t, "an app", files)
	_, stop := startStoppableAgent(t, h.ns, nil)
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	h.waitReady("shop", revision)
	stop()
	// A new watch checks an object someone else wrote within a second
	// of its start (managedFields count whole seconds), and a new agent
	// does not know the old one's writes: let those seconds pass, so that
	// what the tests count is the restart's first sync.
	synced := time.Now()
	eventually(t, "two seconds past the first agent's writes", func() bool { return time.Since(synced) > 2*time.Second })
	return h, revision
}

// restartOnce starts an agent, waits for its first sync of key, lets more
// run, stops it, and returns the requests it made about key's namespace.
func restartOnce(t *testing.T, key types.NamespacedName, more func()) apimetrics.Counts {
	var requests requestCounter
	r, stop := startStoppableAgent(t, key.Namespace, &requests)
	firstSyncDone(t, r, key)
	if more != nil {
		more()
	}
	stop()
	return requests.get()
}

// startStoppableAgent is startAgentWith (defaults) that the test stops
// itself, as a restart does: stop ends the manager and waits for it.
// Every request the agent makes about an object of namespace ns is
// counted in requests (when not nil), by verb and resource.
func startStoppableAgent(t *testing.T, ns string, requests *requestCounter) (*SyncReconciler, func()) {
	t.Helper()
	var wrap func(http.RoundTripper) http.RoundTripper
	if requests != nil {
		wrap = requests.wrap(ns)
	}
	return startStoppableAgentWrapped(t, wrap)
}

// startStoppableAgentWrapped is startStoppableAgent with the agent's
// transport wrapped by wrap (when not nil).
func startStoppableAgentWrapped(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) (*SyncReconciler, func()) {
	t.Helper()
	cfg := rest.CopyConfig(agentConfig)
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	mgr := newAgentManagerFor(t, cfg)
	opts := DefaultOptions()
	opts.CacheDir, opts.Concurrency = t.TempDir(), 1 // a new pod: a fresh cache directory
	opts.Tenancy = ptr.To(testTenancy())
	syncs, err := Setup(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)
	return syncs, stop
}

// requestCounter counts an agent's requests about one namespace's
// objects, from its transport: the API server's own count (apimetrics)
// also sees the syncs of other tests' Syncs, which a new agent takes up
// too.
type requestCounter struct {
	mu     sync.Mutex
	counts apimetrics.Counts
}

func (c *requestCounter) wrap(ns string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if key, ok := requestKey(req, ns); ok {
				c.mu.Lock()
				if c.counts == nil {
					c.counts = apimetrics.Counts{}
				}
				c.counts[key]++
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
}

// get returns the counts so far.
func (c *requestCounter) get() apimetrics.Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKey names req as apimetrics does (verb, resource[/subresource]),
// when it is about an object of namespace ns, or lists or watches a kind
// across namespaces (as the agent's caches do).
func requestKey(req *http.Request, ns string) (apimetrics.Key, bool) {
	_, rest, ok := strings.Cut(req.URL.Path, "/namespaces/"+ns+"/")
	if !ok {
		if strings.Contains(req.URL.Path, "/namespaces/") || req.Method != http.MethodGet {
			return apimetrics.Key{}, false
		}
		// /api/v1/<resource> or /apis/<group>/<version>/<resource>
		segments := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		if (segments[0] != "api" || len(segments) != 3) && (segments[0] != "apis" || len(segments) != 4) {
			return apimetrics.Key{}, false
		}
		rest = segments[len(segments)-1]
	}
	parts := strings.Split(rest, "/")
	resource := parts[0]
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	q := req.URL.Query()
	verb := req.Method
	switch {
	case verb == http.MethodGet && q.Get("watch") == "true":
		verb = "WATCH"
	case verb == http.MethodGet && len(parts) == 1:
		verb = "LIST"
	case verb == http.MethodPatch && strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch"):
		verb = "APPLY"
	}
	if q.Get("dryRun") != "" {
		verb += " dry-run"
	}
	return apimetrics.Key{Verb: verb, Resource: resource}, true
}

// firstSyncDone waits until the agent's first sync of key has settled
// every object: compared in full, or known unchanged since the last
// comparison.
func firstSyncDone(t *testing.T, r *SyncReconciler, key types.NamespacedName) {
	t.Helper()
	eventually(t, "the restarted agent's first sync of "+key.String(), func() bool {
		_, ok := r.Store.LastFull(key)
		return ok
	})
}

// count sums counts of verb over every resource.
func count(counts apimetrics.Counts, verb string) int {
	n := 0
	for k, v := range counts {
		if k.Verb == verb {
			n += v
		}
	}
	return n
}

// writes sums the requests that change something (dry runs apart),
// except the API server's renewals of its own Leases.
func writes(counts apimetrics.Counts) int {
	n := 0
	for k, v := range counts {
		switch k.Verb {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
			if k.Resource != "leases" {
				n += v
			}
		}
	}
	return n
}

func TestARestartOverObjectsInSyncListsAndComparesNothing(t *testing.T) {
	h, revision := syncedThenStopped(t)
	key := keyOf(h.ns, "shop")

	// The Inventory as an agent that kept no digests left it (an upgrade):
	// the first start compares every object once, and records them.
	var inv v1alpha1.Inventory
	if err := c.Get(context.Background(), key, &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Digests == "" {
		t.Fatalf("the first sync recorded no digests in Inventory %s", key)
	}
	if err := c.Patch(context.Background(), &inv, client.RawPatch(types.MergePatchType, []byte(`{"digests":null}`))); err != nil {
		t.Fatal(err)
	}
	upgrade := restartOnce(t, key, nil)
	t.Logf("start over an Inventory without digests: %v", upgrade)
	if got := count(upgrade, "APPLY dry-run"); got < restartObjects {
		t.Errorf("an agent started over an Inventory without digests made %d dry runs, want one per object (%d): it must compare them all once", got, restartObjects)
	}
	if err := c.Get(context.Background(), key, &inv); err != nil {
		t.Fatal(err)
	}
	if inv.Digests == "" {
		t.Fatalf("the full comparison after an upgrade recorded no digests in Inventory %s", key)
	}

	restart := restartOnce(t, key, nil)
	t.Logf("restart over %d objects in sync: %v", restartObjects, restart)
	if got := count(restart, "APPLY dry-run"); got != 0 {
		t.Errorf("an agent restarted over %d objects in sync made %d dry runs, want none: %v", restartObjects, got, restart)
	}
	if got := count(restart, "GET"); got > 10 {
		t.Errorf("an agent restarted over %d objects in sync made %d GETs, want a few, none per object: %v", restartObjects, got, restart)
	}
	// The watches list (a LIST, or a WATCH that sends the list first):
	// one per kind the agent reads.
	if got := count(restart, "LIST") + count(restart, "WATCH"); got > 8 {
		t.Errorf("an agent restarted over %d objects in sync made %d LISTs and WATCHes, want one per kind it reads: %v", restartObjects, got, restart)
	}
	if got := writes(restart); got != 0 {
		t.Errorf("an agent restarted over %d objects in sync made %d writes, want none: %v", restartObjects, got, restart)
	}
	if s := h.syncNow("shop"); s.Status.LastAppliedRevision != revision || ready(s).Status != "True" {
		t.Errorf("after the restart the Sync is %+v at %s, want Ready at %s", ready(s), s.Status.LastAppliedRevision, revision)
	}
}

func TestARestartRevertsWhatWasEditedWhileTheAgentWasDown(t *testing.T) {
	h, _ := syncedThenStopped(t)

	// kubectl edit while no agent runs: another field manager.
	live := get(t, "v1", "ConfigMap", h.ns, "cm-07")
	_ = unstructured.SetNestedField(live.Object, "edited", "data", "key")
	if err := c.Update(context.Background(), live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	// And a Deployment's memory limit, by an update of its own.
	edit(t, h.ns, "web", "128Mi", nil)

	counts := restartOnce(t, keyOf(h.ns, "shop"), func() {
		eventually(t, "the edits made while the agent was down to be reverted", func() bool {
			return configMapData(t, h.ns, "cm-07") == "v1" && memoryLimit(t, get(t, "apps/v1", "Deployment", h.ns, "web")) == "64Mi"
		})
	})
	t.Logf("restart over %d objects, 2 edited: %v", restartObjects, counts)
	// The two edited objects are compared (by the sync, and maybe once
	// more by a drift check of an edit made within a second of the
	// start); the other 38 are not.
	if got := count(counts, "APPLY dry-run"); got > 4 {
		t.Errorf("an agent restarted over %d objects, 2 of them edited, made %d dry runs, want those of the edited ones only: %v", restartObjects, got, counts)
	}
	if s := h.syncNow("shop"); ready(s).Status != "True" {
		t.Errorf("after the restart the Sync is %+v, want Ready", ready(s))
	}
}

func TestDigestsAreRecordedAfterAFullComparisonButNotAfterASmallSyncsFirst(t *testing.T) {
	entries := func(n int) []plan.Entry {
		out := make([]plan.Entry, n)
		for i := range out {
			out[i] = plan.Entry{ID: plan.ID{Kind: "ConfigMap", Namespace: "n", Name: fmt.Sprint(i)}, Version: "v1"}
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		compared        bool
		stored, entries []plan.Entry
		want            bool
	}{
		{"the first sync of a large Sync", true, nil, entries(firstSyncDigests), true},
		{"the first sync of a small Sync: its next full comparison records them", true, nil, entries(4), false},
		{"a full comparison of a small Sync", true, entries(4), entries(4), true},
		{"a sync that trusted the watches or the digests", false, entries(40), entries(40), false},
	} {
		if got := recordsDigests(tc.compared, tc.stored, tc.entries); got != tc.want {
			t.Errorf("%s: recordsDigests = %v, want %v", tc.name, got, tc.want)
		}
	}
}
