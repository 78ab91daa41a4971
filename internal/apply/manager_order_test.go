package apply_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gatedClient records when each write (dry runs apart) starts and ends,
// and can hold a write until another one has started, or fail it.
type gatedClient struct {
	client.Client
	mu     sync.Mutex
	events []string // "start Kind/name", "end Kind/name", in order
	// holdUntil holds the write of a key until the write of its value
	// has started, or the deadline has passed.
	holdUntil map[string]string
	// fail makes the write of these keys fail.
	fail map[string]bool
}

func (g *gatedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if o := (&client.ApplyOptions{}).ApplyOptions(opts); len(o.DryRun) > 0 {
		return g.Client.Apply(ctx, obj, opts...)
	}
	var key string
	if u, ok := obj.(interface {
		GetKind() string
		GetName() string
	}); ok {
		key = u.GetKind() + "/" + u.GetName()
	}
	g.note("start " + key)
	defer g.note("end " + key)
	if other, ok := g.holdUntil[key]; ok {
		deadline := time.Now().Add(5 * time.Second)
		for !g.seen("start "+other) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling a recorder, not synchronising the code under test
		}
	}
	if g.fail[key] {
		return errors.New("refused by the test")
	}
	return g.Client.Apply(ctx, obj, opts...)
}

func (g *gatedClient) note(e string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, e)
}

func (g *gatedClient) seen(e string) bool {
	return g.at(e) >= 0
}

// at is the position of event e, or -1.
func (g *gatedClient) at(e string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, got := range g.events {
		if got == e {
			return i
		}
	}
	return -1
}

// webNeedingSettings is a Deployment that mounts the ConfigMap settings.
const webNeedingSettings = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $NS}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
      volumes: [{name: settings, configMap: {name: settings}}]
`

const webService = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS}
spec:
  ports: [{port: 80}]
`

func TestApplyWritesKindsThatDoNotNeedEachOtherWithoutWaitingForEachOther(t *testing.T) {
	t.Run("a Service is written while a ConfigMap of an earlier rank is, and the Deployment mounting the ConfigMap after it", func(t *testing.T) {
		ns := env.Namespace(t)
		newNS := ns + "-new"
		cleanupClusterScoped(t, "v1", "Namespace", newNS)
		g := &gatedClient{Client: c, holdUntil: map[string]string{"ConfigMap/settings": "Service/web"}}
		p := planOf(
			fromGitInto(t, ns, newNS, "namespaces/new.yaml", `{apiVersion: v1, kind: Namespace, metadata: {name: $NS}}`),
			fromGitInto(t, ns, newNS, "config/settings.yaml", settingsCM),
			fromGitInto(t, ns, newNS, "apps/web.yaml", webNeedingSettings),
			fromGitInto(t, ns, newNS, "apps/service.yaml", webService),
		)

		cs := applyOK(t, newManagerWith(g, ns), p)

		// The ChangeSet keeps the plan's order: by rank, then name.
		expectActions(t, cs, "Namespace/"+newNS+" Created", "ConfigMap/"+newNS+"/settings Created",
			"Service/"+newNS+"/web Created", "Deployment/"+newNS+"/web Created")
		for _, other := range []string{"ConfigMap/settings", "Service/web", "Deployment/web"} {
			if g.at("end Namespace/"+newNS) > g.at("start "+other) {
				t.Errorf("%s was written before its Namespace was; writes: %v", other, g.events)
			}
		}
		if g.at("start Service/web") > g.at("end ConfigMap/settings") {
			t.Errorf("the Service waited for the ConfigMap, which it does not need; writes: %v", g.events)
		}
		if g.at("start Deployment/web") < g.at("end ConfigMap/settings") {
			t.Errorf("the Deployment was written before the ConfigMap it mounts; writes: %v", g.events)
		}
	})

	t.Run("a failed write leaves what needs the failed object unwritten", func(t *testing.T) {
		ns := env.Namespace(t)
		g := &gatedClient{Client: c, fail: map[string]bool{"ConfigMap/settings": true}}
		p := planOf(
			fromGit(t, ns, "config/settings.yaml", settingsCM),
			fromGit(t, ns, "apps/web.yaml", webNeedingSettings),
		)

		cs, err := newManagerWith(g, ns).Apply(context.Background(), p)

		expectContains(t, err, fmt.Sprintf("ConfigMap/%s/settings", ns), "refused by the test")
		if len(cs) != 0 {
			t.Errorf("changes = %v, want none", actions(cs))
		}
		if get(t, "apps/v1", "Deployment", ns, "web") != nil {
			t.Errorf("the Deployment was written although the ConfigMap it mounts failed; writes: %v", g.events)
		}
	})
}
