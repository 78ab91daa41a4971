package controller

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv/apimetrics"
)

// podTemplate is a PodTemplate named name: a kind no other test's Sync
// manages, so that the agent's first watch of it is this test's Sync's.
func podTemplate(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: PodTemplate\nmetadata:\n  name: %s\ntemplate:\n  spec:\n    containers:\n    - name: app\n      image: registry.example/app:1\n", name)
}

// A first sync starts the drift watches of its kinds once its objects are
// validated, while it writes them, not after: a new kind's first list is
// off its path. With the real drift controller running: the agent's own
// writes, which such a watch sees as they happen, are not reverted; an
// edit right after the sync is; and the digests recorded from the writes'
// answers let a restart compare nothing.
func TestAFirstSyncWatchesItsKindsWhileItWritesThem(t *testing.T) {
	h := newHarness(t)
	files := map[string]string{"app/template.yaml": podTemplate("web")}
	for i := range restartObjects - 1 {
		files[fmt.Sprintf("app/cm-%02d.yaml", i)] = configMap(fmt.Sprintf("cm-%02d", i), "v1")
	}
	revision := h.repo.Commit(t, "an app", files)

	watched := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	heldUntilWatched := false
	var requests requestCounter
	counting := requests.wrap(h.ns)
	r, stop := startStoppableAgentWrapped(t, func(rt http.RoundTripper) http.RoundTripper {
		counted := counting(rt)
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			key, ok := requestKey(req, h.ns)
			switch {
			case !ok || key.Resource != "podtemplates":
			case key.Verb == "LIST" || key.Verb == "WATCH":
				once.Do(func() { close(watched) })
			case key.Verb == "APPLY":
				// The PodTemplate's write waits for its kind's watch.
				select {
				case <-watched:
					mu.Lock()
					heldUntilWatched = true
					mu.Unlock()
				case <-time.After(20 * time.Second):
				}
			}
			return counted.RoundTrip(req)
		})
	})
	h.createSync("shop", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	h.waitReady("shop", revision)
	mu.Lock()
	if !heldUntilWatched {
		t.Errorf("the PodTemplate's write was held 20 s and no watch of PodTemplates came meanwhile: the first sync starts its watches after it writes")
	}
	mu.Unlock()

	// kubectl edit right after the sync: reverted.
	live := get(t, "v1", "ConfigMap", h.ns, "cm-07")
	_ = unstructured.SetNestedField(live.Object, "edited", "data", "key")
	if err := c.Update(context.Background(), live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edit right after the first sync to be reverted", func() bool { return configMapData(t, h.ns, "cm-07") == "v1" })
	// A drift check of the sync's own write, seen by the watch before the
	// write's answer was recorded, found the sync writing and looked
	// again once it was done: it leaves nothing for the next sync to
	// compare.
	eventually(t, "the drift checks of the first sync's own writes to settle", func() bool {
		return len(r.Store.ToCheck(keyOf(h.ns, "shop"))) == 0
	})
	stop()
	counts := requests.get()
	t.Logf("first sync and one revert: %v", counts)
	// Each object dry-run and written once by the sync, and the edited one
	// once more by the revert: none of the agent's own writes was taken
	// for drift.
	objects := restartObjects - 1
	if got, want := counts[apimetrics.Key{Verb: "APPLY", Resource: "configmaps"}], objects+1; got != want {
		t.Errorf("ConfigMaps were applied %d times, want %d (each once, and the edited one reverted): %v", got, want, counts)
	}
	if got, most := counts[apimetrics.Key{Verb: "APPLY dry-run", Resource: "configmaps"}], objects+2; got > most {
		t.Errorf("ConfigMaps were dry-run %d times, want at most %d (each once, and the edited one by its drift checks): %v", got, most, counts)
	}
	if got := counts[apimetrics.Key{Verb: "APPLY", Resource: "podtemplates"}]; got != 1 {
		t.Errorf("the PodTemplate was applied %d times, want once", got)
	}

	// The digests of the first sync, taken from its writes' answers, are
	// the watch's: a restart compares nothing but the edited object's
	// revert (made by the drift controller, not recorded as verified by a
	// sync).
	synced := time.Now()
	eventually(t, "two seconds past the first agent's writes", func() bool { return time.Since(synced) > 2*time.Second })
	restart := restartOnce(t, keyOf(h.ns, "shop"), nil)
	t.Logf("restart: %v", restart)
	if got := count(restart, "APPLY dry-run"); got > 1 {
		t.Errorf("an agent restarted after the first sync made %d dry runs, want at most the reverted object's: %v", got, restart)
	}
	if got := writes(restart); got != 0 {
		t.Errorf("an agent restarted after the first sync made %d writes, want none: %v", got, restart)
	}
}
