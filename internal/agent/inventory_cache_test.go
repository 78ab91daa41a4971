package agent_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/driftless/driftless/internal/agent/agenttest"
)

// listsRecorder counts the requests listing or watching Inventories that
// a client sends (client-go may list by a watch that sends the initial
// objects).
type listsRecorder struct {
	next  http.RoundTripper
	lists *atomic.Int32
}

func (r listsRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/inventories") {
		r.lists.Add(1)
	}
	return r.next.RoundTrip(req)
}

// A Sync's first sync reads its Inventory (there is none yet) from the
// agent's cache. The agent starts the Inventories' informer with its
// other caches, so that the first sync does not start it, and wait for
// its LIST, on its own path.
func TestTheAgentCachesInventoriesBeforeItsFirstSync(t *testing.T) {
	ns := env.Namespace(t)
	o := agenttest.Options(t, env.Config, ns)
	var lists atomic.Int32
	o.Config = rest.CopyConfig(o.Config)
	o.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return listsRecorder{next: rt, lists: &lists} })
	a := agenttest.Start(t, o)
	a.Eventually("the agent lists or watches Inventories with no Sync to sync", func() string {
		if lists.Load() == 0 {
			return "no list or watch of Inventories yet"
		}
		return ""
	})
}
