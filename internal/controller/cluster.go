package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
)

// Limits of each remote cluster's clients (spec.kubeConfig). Each remote
// cluster has a rate limiter of its own, and requests to it are bounded
// in time, so that a slow or dead cluster never holds up another's Syncs
// for long.
const (
	RemoteQPS   = 50
	RemoteBurst = 100
	// remoteDialTimeout bounds a connection to a remote API server;
	// remoteRequestTimeout a whole request (watches excepted).
	remoteDialTimeout    = 5 * time.Second
	remoteRequestTimeout = 60 * time.Second
	// remoteProbeTimeout bounds the check that a remote cluster answers,
	// made before a Sync of it touches it; its answer is reused for
	// remoteProbeTTL by the cluster's other Syncs.
	remoteProbeTimeout = 5 * time.Second
	remoteProbeTTL     = 5 * time.Second
	// The retries of a Sync whose cluster does not answer start at
	// remoteRetryMin and double, up to remoteRetryMax (and never later
	// than the Sync's interval).
	remoteRetryMin = 2 * time.Second
	remoteRetryMax = time.Minute
)

// Clusters holds the remote clusters that Syncs apply to (spec.kubeConfig):
// for each kubeconfig Secret, the clients, RESTMapper, discovery and drift
// watches of its cluster, built from its first Sync, rebuilt when the
// Secret changes and stopped with its last Sync. The agent's own cluster
// is not one of them.
type Clusters struct {
	// Tenancy fences tenant Syncs there as here (Identities); nil acts as
	// the kubeconfig's user for every Sync.
	Tenancy *Tenancy
	scheme  *runtime.Scheme
	// watches makes the drift watches of a cluster's cache (see
	// Watches.remote); nil watches nothing.
	watches func(c cache.Cache, cluster string) *Watches
	// shard selects the managed objects the drift watches list there.
	shard *Shard

	mu       sync.Mutex
	clusters map[string]*remoteCluster
	// users maps each Sync to its cluster's key.
	users map[client.ObjectKey]string
}

// NewClusters returns an empty set of remote clusters whose clients use
// scheme, fenced by t (nil: unfenced).
func NewClusters(scheme *runtime.Scheme, t *Tenancy) *Clusters {
	return &Clusters{Tenancy: t, scheme: scheme, clusters: map[string]*remoteCluster{}, users: map[client.ObjectKey]string{}}
}

// remoteCluster is one cluster of a kubeconfig Secret.
type remoteCluster struct {
	// key is the Secret and key it came from (clusterKey), version the
	// Secret's resourceVersion when built, server its address, proxy
	// the kubeconfig's proxy-url ("" for none).
	key, version, server, proxy string
	mapper                      meta.RESTMapper
	identities                  *Identities
	discovery                   discovery.DiscoveryInterface
	probe                       discovery.DiscoveryInterface
	capabilities                capabilities
	// cache holds the drift watches' informers; stop ends them.
	cache   cache.Cache
	stop    context.CancelFunc
	watches *Watches

	mu       sync.Mutex
	checked  time.Time
	lastErr  error
	failures int
	// probing is closed when the probe under way ends; nil when none is.
	probing chan struct{}
}

// clusterKey names the cluster of s's spec.kubeConfig: its Secret and
// key; "" for the agent's own cluster.
func clusterKey(s *v1alpha1.Sync) string {
	if s.Spec.KubeConfig == nil {
		return ""
	}
	ref := s.Spec.KubeConfig.SecretRef
	return s.Namespace + "/" + ref.Name + "/" + ref.Key
}

// use returns the cluster of kc for the Sync syncKey, building it when
// there is none or its Secret changed since, and records that the Sync
// uses it (releasing any other cluster the Sync used).
func (c *Clusters) use(syncKey client.ObjectKey, key string, kc *engine.KubeConfig) (*remoteCluster, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rc := c.clusters[key]
	if rc != nil && rc.version != kc.Version {
		c.stopLocked(key)
		rc = nil
	}
	if rc == nil {
		var err error
		if rc, err = c.build(key, kc); err != nil {
			return nil, err
		}
		c.clusters[key] = rc
	}
	if old, ok := c.users[syncKey]; ok && old != key {
		delete(c.users, syncKey)
		c.releaseLocked(syncKey, old)
	}
	c.users[syncKey] = key
	return rc, nil
}

// lookup returns the cluster the Sync syncKey uses, if it has been built.
func (c *Clusters) lookup(syncKey client.ObjectKey, key string) (*remoteCluster, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users[syncKey] != key {
		return nil, false
	}
	rc, ok := c.clusters[key]
	return rc, ok
}

// Release records that the Sync syncKey uses no remote cluster any more
// (it is gone, or applies to the agent's cluster): a cluster left with no
// Sync is stopped, its drift watches with it.
func (c *Clusters) Release(syncKey client.ObjectKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.users[syncKey]
	if !ok {
		return
	}
	delete(c.users, syncKey)
	c.releaseLocked(syncKey, key)
}

// releaseLocked lets the Sync syncKey's kinds go in the cluster key
// (Watches.Release), and stops the cluster if no Sync uses it now.
func (c *Clusters) releaseLocked(syncKey client.ObjectKey, key string) {
	if rc, ok := c.clusters[key]; ok {
		rc.watches.Release(syncKey)
	}
	c.stopUnusedLocked(key)
}

// Running returns the keys of the remote clusters running, for tests.
func (c *Clusters) Running() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.clusters))
	for k := range c.clusters {
		keys = append(keys, k)
	}
	return keys
}

func (c *Clusters) stopUnusedLocked(key string) {
	for _, k := range c.users {
		if k == key {
			return
		}
	}
	c.stopLocked(key)
}

func (c *Clusters) stopLocked(key string) {
	if rc, ok := c.clusters[key]; ok {
		rc.stop()
		delete(c.clusters, key)
	}
}

// Stop stops every remote cluster's watches.
func (c *Clusters) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.clusters {
		c.stopLocked(k)
	}
}

// build makes the clients of kc's cluster: a rate limiter of its own,
// bounded dials and requests, a RESTMapper and discovery of that cluster,
// and a cache for its drift watches, started at once.
func (c *Clusters) build(key string, kc *engine.KubeConfig) (*remoteCluster, error) {
	cfg := rest.CopyConfig(kc.Config)
	cfg.QPS, cfg.Burst = RemoteQPS, RemoteBurst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(RemoteQPS, RemoteBurst)
	cfg.Timeout = remoteRequestTimeout
	cfg.Dial = (&net.Dialer{Timeout: remoteDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	cfg.UserAgent = "driftless"
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s of spec.kubeConfig: %w", kc.Server, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("cluster %s of spec.kubeConfig: %w", kc.Server, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	probeCfg := rest.CopyConfig(cfg)
	probeCfg.Timeout = remoteProbeTimeout
	probe, err := discovery.NewDiscoveryClientForConfigAndClient(probeCfg, httpClient)
	if err != nil {
		return nil, err
	}
	options := client.Options{Scheme: c.scheme, Mapper: newMappingCache(mapper), HTTPClient: httpClient}
	agent, err := client.New(cfg, options)
	if err != nil {
		return nil, err
	}
	tenancy := Tenancy{}
	if c.Tenancy != nil {
		tenancy = *c.Tenancy
	}
	ids := NewIdentities(tenancy, agent, cfg, options)
	ids.cluster = kc.Server
	rc := &remoteCluster{key: key, version: kc.Version, server: kc.Server, proxy: kc.Proxy, mapper: mapper, identities: ids,
		discovery: dc, probe: probe, stop: func() {}}
	if c.watches != nil {
		opts := ShardCacheOptions(c.shard)
		opts.ByObject = nil // no Syncs or Inventories there
		opts.HTTPClient, opts.Scheme, opts.Mapper = httpClient, c.scheme, mapper
		ca, err := cache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = ca.Start(ctx) }()
		rc.cache, rc.stop, rc.watches = ca, cancel, c.watches(ca, key)
	}
	return rc, nil
}

// reachable returns nil when the cluster answered within
// remoteProbeTimeout, now or in the last remoteProbeTTL, else a
// *UnreachableError.
// One probe runs at a time, outside the lock: while it runs, the other
// Syncs of the cluster get the answer of the probe before it at once, or,
// when there was none, wait for this one; none waits for a probe of its
// own behind another's (a dead cluster would hold each worker up to
// remoteProbeTimeout in turn).
func (rc *remoteCluster) reachable(now time.Time) error {
	rc.mu.Lock()
	if !rc.checked.IsZero() && (now.Sub(rc.checked) < remoteProbeTTL || rc.probing != nil) {
		defer rc.mu.Unlock()
		return rc.lastErr
	}
	if done := rc.probing; done != nil {
		rc.mu.Unlock()
		<-done
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.lastErr
	}
	done := make(chan struct{})
	rc.probing = done
	rc.mu.Unlock()
	_, err := rc.probe.ServerVersion()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.checked = time.Now()
	rc.lastErr = nil
	if err != nil {
		rc.lastErr = rc.unreachable(err)
	}
	rc.probing = nil
	close(done)
	return rc.lastErr
}

// failed records whether a sync of the cluster found it unreachable, and
// returns how long its Syncs wait before trying again: remoteRetryMin,
// doubling with each failure in a row, up to remoteRetryMax.
func (rc *remoteCluster) failed(down bool) time.Duration {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !down {
		rc.failures = 0
		return 0
	}
	rc.failures++
	wait := remoteRetryMin << min(rc.failures-1, 10)
	return min(wait, remoteRetryMax)
}

// unreachable words err, a failure to reach the cluster, naming its
// server and never its credentials.
func (rc *remoteCluster) unreachable(err error) *UnreachableError {
	cause := "no answer within " + remoteProbeTimeout.String()
	if op := (*net.OpError)(nil); errors.As(err, &op) {
		cause = op.Error()
	}
	return &UnreachableError{Server: rc.server, Cause: cause}
}

// UnreachableError is a remote cluster that does not answer.
type UnreachableError struct {
	// Server is its address (scheme and host); Cause what the connection
	// met, such as "dial tcp 10.0.0.1:6443: connect: connection refused".
	Server, Cause string
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cluster %s of spec.kubeConfig is unreachable (%s); the Sync keeps what it last applied there and retries: check that its API server runs and that the agent can reach that address", e.Server, e.Cause)
}

// unreachableCause reports whether err says a server could not be
// reached: a connection refused, reset or timed out, a name not found.
func unreachableCause(err error) bool {
	var ne net.Error
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		(errors.As(err, &ne) && ne.Timeout())
}
