package controller

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
)

// target is the cluster a Sync's objects live in, and who the Sync acts
// as there.
type target struct {
	id identity
	// remote is the cluster of spec.kubeConfig; nil for the agent's own.
	remote *remoteCluster
}

// watcher is what a sync asks of the drift watches of its cluster.
type watcher interface {
	Ensure(ctx context.Context, key client.ObjectKey, gvks []schema.GroupVersionKind, since time.Time) error
	Covers(gvks []schema.GroupVersionKind) bool
	NotWatched(gvks []schema.GroupVersionKind) []string
	Release(key client.ObjectKey)
}

// targetOf returns the cluster s applies to: the agent's own, where s
// acts as local; or the cluster of its spec.kubeConfig, whose Secret is
// read with reader (as the Sync) and which must answer now. On failure it
// returns the Ready reason: AccessDenied is decided by the caller (a
// read the Sync's ServiceAccount may not make), FetchFailed when the API
// server could not give the Secret, ClusterUnreachable, else InvalidSpec.
func (r *SyncReconciler) targetOf(ctx context.Context, s *v1alpha1.Sync, local identity, reader engine.Reader) (target, string, error) {
	syncKey := client.ObjectKeyFromObject(s)
	if s.Spec.KubeConfig == nil {
		r.Clusters.Release(syncKey)
		return target{id: local}, "", nil
	}
	if r.Clusters == nil {
		return target{}, v1alpha1.ReasonInvalidSpec, errors.New("spec.kubeConfig is set, and this agent applies to its own cluster only")
	}
	kc, err := engine.ReadKubeConfig(ctx, reader, s)
	if err != nil {
		if errors.Is(err, engine.ErrKubeConfigUnreadable) {
			return target{}, v1alpha1.ReasonFetchFailed, err
		}
		return target{}, v1alpha1.ReasonInvalidSpec, err
	}
	if err := kc.CheckHosts(r.sourceHosts(s)); err != nil {
		return target{}, v1alpha1.ReasonInvalidSpec, err
	}
	rc, err := r.Clusters.use(syncKey, clusterKey(s), kc)
	if err != nil {
		return target{}, v1alpha1.ReasonInvalidSpec, err
	}
	if err := rc.reachable(r.now()); err != nil {
		return target{remote: rc}, v1alpha1.ReasonClusterUnreachable, err
	}
	id, err := rc.identityOf(s, r.Identities.tenancy())
	if err != nil {
		return target{}, v1alpha1.ReasonServiceAccountRequired, err
	}
	return target{id: id, remote: rc}, "", nil
}

// identityOf returns who s acts as in the cluster: fenced, as it would
// locally (its ServiceAccount, impersonated there); unfenced, the
// kubeconfig's user.
func (rc *remoteCluster) identityOf(s *v1alpha1.Sync, fences *Tenancy) (identity, error) {
	sa := ""
	if fences != nil {
		var err error
		if sa, err = fences.serviceAccountOf(s); err != nil {
			return identity{}, err
		}
	}
	return rc.identities.For(s, sa)
}

// discovery returns what tells charts the cluster's version and APIs, and
// its cache.
func (r *SyncReconciler) discoveryOf(t target) (discovery.DiscoveryInterface, *capabilities) {
	if t.remote != nil {
		return t.remote.discovery, &t.remote.capabilities
	}
	return r.Discovery, &r.capabilities
}

// renderScope returns the render options of t's cluster: its RESTMapper
// answers which kinds are namespaced.
func (r *SyncReconciler) renderScope(t target) engine.RenderOptions {
	opts := r.RenderOptions
	if t.remote != nil {
		opts.Scope = engine.MapperScope{Mapper: t.remote.mapper}
	}
	return opts
}

// digest tells renders for different clusters apart in the render cache.
func (t target) digest() string {
	if t.remote == nil {
		return ""
	}
	return "@" + t.remote.server
}

// unreachable returns err as ClusterUnreachable when t is a remote
// cluster and err says it could not be reached; else reason and err.
func (t target) unreachable(reason string, err error) (string, error) {
	if t.remote == nil || err == nil || !unreachableCause(err) {
		return reason, err
	}
	return v1alpha1.ReasonClusterUnreachable, t.remote.unreachable(err)
}

// watchesOf returns the drift watches of the cluster s applies to; nil
// when there are none (the agent runs none, or s's remote cluster is not
// built).
func (r *SyncReconciler) watchesOf(s *v1alpha1.Sync) watcher {
	if s.Spec.KubeConfig == nil {
		if r.Watches == nil {
			return nil
		}
		return r.Watches
	}
	rc, ok := r.Clusters.lookup(client.ObjectKeyFromObject(s), clusterKey(s))
	if !ok || rc.watches == nil {
		return nil
	}
	return rc.watches
}

// driftTarget returns, for a drift check of s's object seen in cluster
// (drift.Request.Cluster), what reads the object's metadata as the watch
// saw it and who s acts as there; ok is false when the object is not in
// the cluster s applies to now, or s's cluster is not built yet.
func (r *DriftReconciler) driftTarget(s *v1alpha1.Sync, cluster string) (client.Reader, identity, bool, error) {
	if cluster != clusterKey(s) {
		return nil, identity{}, false, nil
	}
	if cluster == "" {
		id, err := identityOf(r.Identities, r.Applier, s)
		if r.Watches != nil {
			return r.Watches.reader(), id, true, err
		}
		return r.Client, id, true, err
	}
	rc, ok := r.Clusters.lookup(client.ObjectKeyFromObject(s), cluster)
	if !ok || rc.cache == nil {
		return nil, identity{}, false, nil
	}
	id, err := rc.identityOf(s, r.Identities.tenancy())
	return rc.watches.reader(), id, true, err
}
