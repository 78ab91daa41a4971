package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/receiver"
	"github.com/driftless/driftless/internal/testenv"
)

// --shard NAME, --shard="" and no --shard are three different agents:
// one shard, the Syncs without a shard label, every Sync.
func TestAgentShardFlagTellsUnsetFromEmpty(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want *string
	}{
		{"without --shard the agent serves every Sync", nil, nil},
		{"--shard='' serves the Syncs without a shard label", []string{"--shard="}, ptrTo("")},
		{"--shard shard-1 serves that shard", []string{"--shard", "shard-1"}, ptrTo("shard-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := agentFlags(t, io.Discard, append([]string{"--kubeconfig", env.ControlPlane.KubeconfigPath()}, tc.args...)...)
			switch {
			case tc.want == nil && o.Shard != nil:
				t.Errorf("Shard = %q, want unset (every Sync)", *o.Shard)
			case tc.want != nil && (o.Shard == nil || *o.Shard != *tc.want):
				t.Errorf("Shard = %v, want %q", o.Shard, *tc.want)
			}
		})
	}
}

func TestAgentRefusesAShardNameThatIsNotALabelBeforeConnecting(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute([]string{"agent", "--shard", "Shard_1", "--kubeconfig", "/nonexistent/kubeconfig"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), `--shard: shard name "Shard_1"`) || !strings.Contains(errOut.String(), "such as shard-1") {
		t.Errorf("exit %d, %q; want 2 naming the shard and what to write", code, errOut.String())
	}
}

func ptrTo[T any](v T) *T { return &v }

// writes records the requests that change something (not GET, LIST or
// WATCH) an agent sends, through every client it builds from its
// configuration, its tenants' impersonating clients included.
type writes struct {
	mu   sync.Mutex
	seen []string
}

func (w *writes) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/leases/") && !strings.HasSuffix(req.URL.Path, "/leases") {
				w.mu.Lock()
				w.seen = append(w.seen, req.Method+" "+req.URL.Path)
				w.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

// since returns the writes after the first n, and how many there are.
func (w *writes) since(n int) ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen[min(n, len(w.seen)):]), len(w.seen)
}

// to counts the writes to paths containing part.
func (w *writes) to(part string) int {
	got, _ := w.since(0)
	n := 0
	for _, s := range got {
		if strings.Contains(s, part) {
			n++
		}
	}
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// shardedSync is a tenant's Sync of repo's apps/name.yaml in shard.
func shardedSync(ns, name, url, shard string) *v1alpha1.Sync {
	return &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.ShardLabel: shard}},
		Spec: v1alpha1.SyncSpec{
			Source:             v1alpha1.Source{Git: v1alpha1.GitSource{URL: url, Branch: "main"}},
			Paths:              []string{"apps/" + name},
			Interval:           metav1.Duration{Duration: time.Hour},
			ServiceAccountName: "tenant",
		},
	}
}

// startShard runs an agent of shard as the agent's ServiceAccount of
// agentNS, counting its writes.
func startShard(t *testing.T, cfg *rest.Config, agentNS, shard string, mutate func(*agent.Options)) (*agenttest.Agent, *writes) {
	t.Helper()
	w := &writes{}
	o := agenttest.Options(t, w.wrap(cfg), agentNS)
	o.Shard = &shard
	if mutate != nil {
		mutate(&o)
	}
	return agenttest.Start(t, o), w
}

// A platform team runs two shards of agents, each as the agent's own
// ServiceAccount with tenancy on. Each serves only its Syncs; a Sync
// relabelled to the other shard is taken over at once (its interval is an
// hour): the new shard applies it and reverts a hand edit, the old shard
// writes nothing more about it, and nothing is pruned or re-created.
func TestShardsServeTheirSyncsAndHandOverARelabelledOne(t *testing.T) {
	ctx := context.Background()
	agentNS, ns, agentCfg, repo, first := shardFixture(t)
	a, writesA := startShard(t, agentCfg, agentNS, "a", nil)
	b, writesB := startShard(t, agentCfg, agentNS, "b", nil)
	webKey, _ := webOnAAndAPIOnB(a, b, ns, repo, first)

	t.Run("each shard applies only its own Syncs", func(t *testing.T) {
		if n := writesA.to("/configmaps/web-config"); n == 0 {
			t.Error("shard a did not write web-config")
		}
		if n := writesB.to("/configmaps/web-config"); n != 0 {
			t.Errorf("shard b wrote web-config %d times; it is shard a's", n)
		}
		if n := writesA.to("/configmaps/api-config"); n != 0 {
			t.Errorf("shard a wrote api-config %d times; it is shard b's", n)
		}
		if got := shardLabelOf(t, "web-config", ns); got != "a" {
			t.Errorf("web-config is labelled %s=%q, want a", v1alpha1.SyncShardLabel, got)
		}
		var inv v1alpha1.Inventory
		if err := c.Get(ctx, webKey, &inv); err != nil || inv.Labels[v1alpha1.SyncShardLabel] != "a" {
			t.Errorf("web's Inventory: %v, labels %v; want %s=a", err, inv.Labels, v1alpha1.SyncShardLabel)
		}
	})

	// Shard a is idle: its sync of web was recorded (its event sent).
	a.Eventually("web's sync is recorded in an event", eventAbout(ns, "web", "applied "+first[:7]))
	var before corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &before); err != nil {
		t.Fatal(err)
	}
	_, mark := writesA.since(0)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var s v1alpha1.Sync
		if err := c.Get(ctx, webKey, &s); err != nil {
			return err
		}
		s.Labels[v1alpha1.ShardLabel] = "b"
		return c.Update(ctx, &s)
	})
	if err != nil {
		t.Fatalf("relabel web to shard b: %v", err)
	}

	t.Run("the new shard takes the relabelled Sync over at once", func(t *testing.T) {
		b.Eventually("shard b applies web, labelling its objects", func() string {
			if got := shardLabelOf(t, "web-config", ns); got != "b" {
				return fmt.Sprintf("web-config is labelled %s=%q, want b", v1alpha1.SyncShardLabel, got)
			}
			var inv v1alpha1.Inventory
			if err := c.Get(ctx, webKey, &inv); err != nil || inv.Labels[v1alpha1.SyncShardLabel] != "b" {
				return fmt.Sprintf("web's Inventory: %v, labels %v; want %s=b", err, inv.Labels, v1alpha1.SyncShardLabel)
			}
			return ""
		})
		if n := writesB.to("/configmaps/web-config"); n == 0 {
			t.Error("shard b did not write web-config")
		}
	})

	t.Run("the new shard reverts a hand edit", func(t *testing.T) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &cm); err != nil {
				return err
			}
			cm.Data["greeting"] = "edited by hand"
			return c.Update(ctx, &cm, client.FieldOwner("kubectl-edit"))
		})
		if err != nil {
			t.Fatal(err)
		}
		reverted := 0
		b.Eventually("the hand edit of web-config is reverted", func() string {
			if v := agenttest.Greeting(t, c, ns, "web-config"); v != "v1" {
				return fmt.Sprintf("greeting = %q, want v1 from git", v)
			}
			reverted = writesB.to("/configmaps/web-config")
			return ""
		})
		if reverted < 2 {
			t.Errorf("shard b wrote web-config %d times; want its takeover and its revert", reverted)
		}
	})

	t.Run("the old shard writes nothing after the handover", func(t *testing.T) {
		if after, _ := writesA.since(mark); len(after) > 0 {
			t.Errorf("shard a wrote after web moved to shard b:\n%s", strings.Join(after, "\n"))
		}
	})

	t.Run("nothing is pruned or re-created", func(t *testing.T) {
		var now corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &now); err != nil {
			t.Fatalf("web-config is gone: %v", err)
		}
		if now.UID != before.UID {
			t.Errorf("web-config was re-created (uid %s, was %s)", now.UID, before.UID)
		}
		var s v1alpha1.Sync
		if err := c.Get(ctx, webKey, &s); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(s.Finalizers, v1alpha1.Finalizer) || !s.DeletionTimestamp.IsZero() {
			t.Errorf("web's finalizers %v, deletion %v: want it kept, not deleted", s.Finalizers, s.DeletionTimestamp)
		}
		for _, w := range []*writes{writesA, writesB} {
			for _, s := range func() []string { got, _ := w.since(0); return got }() {
				if strings.HasPrefix(s, http.MethodDelete) && strings.Contains(s, "/configmaps/") {
					t.Errorf("a shard deleted a ConfigMap: %s", s)
				}
			}
		}
	})
}

// Two agents claim one shard with leader election on: the Lease of the
// shard decides which one applies; stopping it makes the other take over.
// A second shard's agent leads its own Lease at the same time.
func TestTwoAgentsOfOneShardLetTheLeaseDecide(t *testing.T) {
	ctx := context.Background()
	agentNS, ns, agentCfg, repo, first := shardFixture(t)
	elect := func(o *agent.Options) {
		o.LeaderElect = true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, time.Second
	}
	one, writesOne := startShard(t, agentCfg, agentNS, "a", elect)
	two, writesTwo := startShard(t, agentCfg, agentNS, "a", elect)
	other, _ := startShard(t, agentCfg, agentNS, "b", elect)
	web := shardedSync(ns, "web", repo.HTTPURL(), "a")
	api := shardedSync(ns, "api", repo.HTTPURL(), "b")
	createSyncs(one, web, api)
	webKey := client.ObjectKeyFromObject(web)
	one.Eventually("shard a applies web", agenttest.AppliedAt(c, webKey, first))
	other.Eventually("shard b, leading its own Lease, applies api", agenttest.AppliedAt(c, client.ObjectKeyFromObject(api), first))
	for _, lease := range []string{"driftless-agent-shard-a", "driftless-agent-shard-b"} {
		var l coordinationv1.Lease
		if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: lease}, &l); err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Errorf("Lease %s: %v, holder %v; want one held per shard", lease, err, l.Spec.HolderIdentity)
		}
	}

	leader, standby, standbyWrites := one, two, writesTwo
	if writesTwo.to("/configmaps/web-config") > 0 {
		leader, standby, standbyWrites = two, one, writesOne
	}
	if writesOne.to("/configmaps/web-config") > 0 && writesTwo.to("/configmaps/web-config") > 0 {
		t.Fatal("both agents of shard a wrote web-config")
	}
	// The Sync's interval is an hour: the leader does not look at git
	// again, and the standby syncs web when it starts leading and finds
	// the new commit. The commit is made before the leader stops, so that
	// a standby quick to take over cannot sync the old one first.
	second := repo.Commit(t, "web v2", map[string]string{"apps/web/config.yaml": agenttest.ConfigMap(ns, "web-config", "v2")})
	if err := leader.Stop(); err != nil {
		t.Fatalf("stop the leader: %v", err)
	}
	standby.Eventually("the standby takes over and applies the new commit", agenttest.AppliedAt(c, webKey, second))
	if n := standbyWrites.to("/configmaps/web-config"); n == 0 {
		t.Error("the standby did not write web-config")
	}
	if v := agenttest.Greeting(t, c, ns, "web-config"); v != "v2" {
		t.Errorf("greeting = %q, want v2", v)
	}
}

// shardFixture makes the agent's ServiceAccount in agentNS (cfg), a
// tenant in ns, and a repository with two apps, web and api, at first.
func shardFixture(t *testing.T) (agentNS, ns string, cfg *rest.Config, repo *testenv.Repo, first string) {
	agentNS, ns = env.Namespace(t), env.Namespace(t)
	cfg = agentIdentityIn(t, agentNS)
	tenantIn(t, c, ns, "tenant", true)
	repo = testenv.NewGitServer(t).NewRepo(t, "fleet")
	first = repo.Commit(t, "two apps", map[string]string{
		"apps/web/config.yaml": agenttest.ConfigMap(ns, "web-config", "v1"),
		"apps/api/config.yaml": agenttest.ConfigMap(ns, "api-config", "v1"),
	})
	return agentNS, ns, cfg, repo, first
}

// webOnAAndAPIOnB creates the Syncs web in shard a and api in shard b
// (shardFixture's apps), and waits until each shard's agent has applied
// its Sync at first.
func webOnAAndAPIOnB(a, b *agenttest.Agent, ns string, repo *testenv.Repo, first string) (web, api client.ObjectKey) {
	webSync := shardedSync(ns, "web", repo.HTTPURL(), "a")
	apiSync := shardedSync(ns, "api", repo.HTTPURL(), "b")
	createSyncs(a, webSync, apiSync)
	web, api = client.ObjectKeyFromObject(webSync), client.ObjectKeyFromObject(apiSync)
	a.Eventually("shard a applies web", agenttest.AppliedAt(c, web, first))
	b.Eventually("shard b applies api", agenttest.AppliedAt(c, api, first))
	return web, api
}

// createSyncs creates syncs once the agent a has installed their CRD.
func createSyncs(a *agenttest.Agent, syncs ...*v1alpha1.Sync) {
	a.Eventually("the Syncs are created (the agents install their CRD as they start)", func() string {
		for _, s := range syncs {
			if s.UID == "" {
				if err := c.Create(context.Background(), s); err != nil {
					return err.Error()
				}
			}
		}
		return ""
	})
}

// shardLabelOf returns the driftless.dev/sync-shard label of the
// ConfigMap namespace/name.
func shardLabelOf(t *testing.T, name, namespace string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &cm); err != nil {
		return "(" + err.Error() + ")"
	}
	return cm.Labels[v1alpha1.SyncShardLabel]
}

// eventAbout checks that an Event about the Sync namespace/name has a
// note containing want.
func eventAbout(namespace, name, want string) func() string {
	return func() string {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			return err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == v1alpha1.SyncKind && e.Regarding.Name == name && strings.Contains(e.Note, want) {
				return ""
			}
		}
		return fmt.Sprintf("no event about Sync %s/%s says %q", namespace, name, want)
	}
}

// A git host calls one address, which reaches one shard's agent (install
// --shards routes the webhook Service to the agent of the Syncs without a
// shard label); a push still wakes the Syncs of the other shards at once:
// the receiving agent passes it on through the ConfigMap
// driftless-push-notices, which each sharded agent watches. Both Syncs'
// interval is an hour, so only a wake-up brings the new commit in.
func TestAPushToOneShardsReceiverWakesTheSyncsOfTheOthers(t *testing.T) {
	ctx := context.Background()
	agentNS, ns, agentCfg, repo, first := shardFixture(t)
	const key = "s3cret"
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: agentNS},
		Data: map[string][]byte{"generic": []byte(key)}}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	a, _ := startShard(t, agentCfg, agentNS, "a", func(o *agent.Options) { o.WebhookAddr, o.WebhookSecret = addr, "webhook" })
	b, _ := startShard(t, agentCfg, agentNS, "b", nil)
	webKey, apiKey := webOnAAndAPIOnB(a, b, ns, repo, first)

	second := repo.Commit(t, "both apps v2", map[string]string{
		"apps/web/config.yaml": agenttest.ConfigMap(ns, "web-config", "v2"),
		"apps/api/config.yaml": agenttest.ConfigMap(ns, "api-config", "v2"),
	})
	body := fmt.Appendf(nil, `{"repository": %q, "ref": "refs/heads/main"}`, repo.HTTPURL())
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	var reply receiver.Reply
	a.Eventually("shard a's receiver takes the push", func() string {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/generic", bytes.NewReader(body))
		if err != nil {
			return err.Error()
		}
		req.Header.Set("X-Driftless-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		reply = receiver.Reply{}
		if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
			return fmt.Sprintf("%d: %v", resp.StatusCode, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%d: %+v", resp.StatusCode, reply)
		}
		return ""
	})
	if want := []string{ns + "/web"}; !slices.Equal(reply.Woken, want) || !strings.Contains(reply.Message, "passed to the other shards") {
		t.Errorf("reply %+v: want woken %v (shard a's) and the push passed to the other shards", reply, want)
	}
	a.Eventually("shard a applies web's new commit", agenttest.AppliedAt(c, webKey, second))
	b.Eventually("shard b applies api's new commit, woken by the push shard a took", agenttest.AppliedAt(c, apiKey, second))

	var notices corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: v1alpha1.RelayConfigMap}, &notices); err != nil {
		t.Fatalf("the push notices' ConfigMap: %v", err)
	}
	if got := notices.Data["notices"]; !strings.Contains(got, repo.HTTPURL()) || !strings.Contains(got, `"from":"a"`) || strings.Contains(got, key) {
		t.Errorf("the push notices' ConfigMap holds %s; want the push from shard a, naming the repository, and no secret", got)
	}
}
