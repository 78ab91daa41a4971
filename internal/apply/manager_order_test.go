package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// has started, or two seconds have passed.
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
	return g.write(key, func() error { return g.Client.Apply(ctx, obj, opts...) })
}

// Patch is Apply for a server-side apply whose answer is its metadata.
func (g *gatedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if apply, dryRun := serverSideApply(patch, opts); !apply || dryRun {
		return g.Client.Patch(ctx, obj, patch, opts...)
	}
	key := obj.GetObjectKind().GroupVersionKind().Kind + "/" + obj.GetName()
	return g.write(key, func() error { return g.Client.Patch(ctx, obj, patch, opts...) })
}

// write records the write of key, held or failed as the test asks.
func (g *gatedClient) write(key string, do func() error) error {
	g.note("start " + key)
	defer g.note("end " + key)
	if other, ok := g.holdUntil[key]; ok {
		deadline := time.Now().Add(2 * time.Second)
		for !g.seen("start "+other) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling a recorder, not synchronising the code under test
		}
	}
	if g.fail[key] {
		return errors.New("refused by the test")
	}
	return do()
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

const webService = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS}
spec:
  ports: [{port: 80}]
`

// webOnItsOwn is a Deployment whose spec names no other object: what it
// needs (RBAC for its default ServiceAccount, the environment of the
// Services of its namespace) is found by no reference.
const webOnItsOwn = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: $NAME, namespace: $NS}
spec:
  selector: {matchLabels: {app: $NAME}}
  template:
    metadata: {labels: {app: $NAME}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
`

func named(manifest, name string) string { return strings.ReplaceAll(manifest, "$NAME", name) }

func TestApplyWritesKindsInOrderWithinANamespaceAndNamespacesIndependently(t *testing.T) {
	t.Run("a Deployment is written after the ServiceAccount, Secret, ConfigMap, Role and Service of its namespace", func(t *testing.T) {
		ns := env.Namespace(t)
		// Were the Deployment started alongside the Service, the held
		// Service write would see it start.
		g := &gatedClient{Client: c, holdUntil: map[string]string{"Service/web": "Deployment/web"}}
		p := planOf(
			fromGit(t, ns, "apps/web.yaml", named(webOnItsOwn, "web")),
			fromGit(t, ns, "apps/service.yaml", webService),
			fromGit(t, ns, "rbac/role.yaml", `{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: web, namespace: $NS}, rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]}`),
			fromGit(t, ns, "config/settings.yaml", settingsCM),
			fromGit(t, ns, "config/secret.yaml", `{apiVersion: v1, kind: Secret, metadata: {name: web, namespace: $NS}, stringData: {token: not-a-secret}}`),
			fromGit(t, ns, "rbac/sa.yaml", `{apiVersion: v1, kind: ServiceAccount, metadata: {name: web, namespace: $NS}}`),
		)

		cs := applyOK(t, newManagerWith(g, ns), p)

		expectActions(t, cs, "ServiceAccount/"+ns+"/web Created", "Secret/"+ns+"/web Created", "ConfigMap/"+ns+"/settings Created",
			"Role/"+ns+"/web Created", "Service/"+ns+"/web Created", "Deployment/"+ns+"/web Created")
		order := []string{"ServiceAccount/web", "Secret/web", "ConfigMap/settings", "Role/web", "Service/web", "Deployment/web"}
		for i := 1; i < len(order); i++ {
			for _, before := range order[:i] {
				if g.at("start "+order[i]) < g.at("end "+before) {
					t.Errorf("%s was started before %s of the same namespace was written; writes: %v", order[i], before, g.events)
				}
			}
		}
	})

	t.Run("a token Secret is written after its ServiceAccount", func(t *testing.T) {
		ns := env.Namespace(t)
		g := &gatedClient{Client: c, holdUntil: map[string]string{"ServiceAccount/runner": "Secret/runner-token"}}
		p := planOf(
			fromGit(t, ns, "rbac/token.yaml", `
apiVersion: v1
kind: Secret
metadata: {name: runner-token, namespace: $NS, annotations: {kubernetes.io/service-account.name: runner}}
type: kubernetes.io/service-account-token
`),
			fromGit(t, ns, "rbac/sa.yaml", `{apiVersion: v1, kind: ServiceAccount, metadata: {name: runner, namespace: $NS}}`),
		)

		applyOK(t, newManagerWith(g, ns), p)

		if g.at("start Secret/runner-token") < g.at("end ServiceAccount/runner") {
			t.Errorf("the token Secret was started before its ServiceAccount was written (Kubernetes deletes such a Secret); writes: %v", g.events)
		}
	})

	t.Run("a slow write in one namespace holds back the later kinds of that namespace only", func(t *testing.T) {
		ns := env.Namespace(t)
		other := env.Namespace(t)
		// The ConfigMap of ns is held until the Deployment of the other
		// namespace starts: were namespaces waiting for each other, it
		// would not start before the deadline.
		g := &gatedClient{Client: c, holdUntil: map[string]string{"ConfigMap/slow": "Deployment/web-other"}}
		p := planOf(
			fromGit(t, ns, "a/config.yaml", `{apiVersion: v1, kind: ConfigMap, metadata: {name: slow, namespace: $NS}}`),
			fromGit(t, ns, "a/web.yaml", named(webOnItsOwn, "web-slow")),
			fromGitInto(t, ns, other, "b/config.yaml", `{apiVersion: v1, kind: ConfigMap, metadata: {name: quick, namespace: $NS}}`),
			fromGitInto(t, ns, other, "b/web.yaml", named(webOnItsOwn, "web-other")),
		)

		applyOK(t, newManagerWith(g, ns), p)

		if g.at("start Deployment/web-other") > g.at("end ConfigMap/slow") {
			t.Errorf("the Deployment of namespace %s waited for a ConfigMap of namespace %s; writes: %v", other, ns, g.events)
		}
		if g.at("start Deployment/web-other") < g.at("end ConfigMap/quick") {
			t.Errorf("the Deployment of namespace %s was started before the ConfigMap of its namespace was written; writes: %v", other, g.events)
		}
		if g.at("start Deployment/web-slow") < g.at("end ConfigMap/slow") {
			t.Errorf("the Deployment of namespace %s was started before the ConfigMap of its namespace was written; writes: %v", ns, g.events)
		}
	})

	t.Run("a failed write leaves the later kinds of its namespace unwritten", func(t *testing.T) {
		ns := env.Namespace(t)
		g := &gatedClient{Client: c, fail: map[string]bool{"ConfigMap/settings": true}}
		p := planOf(
			fromGit(t, ns, "config/settings.yaml", settingsCM),
			fromGit(t, ns, "apps/web.yaml", named(webOnItsOwn, "web")),
			fromGit(t, ns, "apps/service.yaml", webService),
		)

		cs, err := newManagerWith(g, ns).Apply(context.Background(), p)

		expectContains(t, err, fmt.Sprintf("ConfigMap/%s/settings", ns), "refused by the test")
		if len(cs) != 0 {
			t.Errorf("changes = %v, want none", actions(cs))
		}
		if get(t, "v1", "Service", ns, "web") != nil || get(t, "apps/v1", "Deployment", ns, "web") != nil {
			t.Errorf("a later kind of the namespace was written after its ConfigMap failed; writes: %v", g.events)
		}
	})
}
