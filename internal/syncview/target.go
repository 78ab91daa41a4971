package syncview

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
)

// targetTimeout bounds each request to a Sync's remote cluster, so that a
// view of a Sync whose cluster does not answer still shows.
const targetTimeout = 10 * time.Second

// TargetReader returns what reads s's objects: c itself for a Sync of the
// cluster c reads, and for a Sync with spec.kubeConfig a client of that
// cluster, made from its kubeconfig Secret, which c reads (so as the
// viewer: the Secret is read with the viewer's rights, and the objects
// with the kubeconfig's). It also returns the cluster's server, for
// messages. Its errors name the Secret and the cluster, never what the
// Secret holds; a viewer who may not read the Secret is told so, and
// what to ask for. Only the server the agent last synced s to
// (status.cluster), through the proxy it used (status.clusterProxy), is
// connected to: a kubeconfig that names another server or proxy is an
// error, and no connection is made.
func TargetReader(ctx context.Context, c client.Reader, s *v1alpha1.Sync) (client.Reader, string, error) {
	if s.Spec.KubeConfig == nil {
		return c, v1alpha1.InCluster, nil
	}
	cluster := s.TargetCluster()
	secret := client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.KubeConfig.SecretRef.Name}
	kc, err := engine.ReadKubeConfig(ctx, c, s)
	switch {
	case apierrors.IsForbidden(err):
		return nil, cluster, fmt.Errorf("the objects are in cluster %s, whose kubeconfig is in Secret %s, which you may not read: ask for get on that Secret, or use a kubeconfig context of that cluster", cluster, secret)
	case err != nil:
		return nil, cluster, fmt.Errorf("the objects are in cluster %s: %w", cluster, err)
	}
	// Only the cluster the agent last synced the Sync to is read: its
	// objects are there, and the agent checked that address (such as
	// against --tenant-source-hosts) before it connected to it. A
	// kubeconfig that names another server is not connected to.
	if kc.Server != s.Status.Cluster {
		if s.Status.Cluster == "" {
			return nil, cluster, fmt.Errorf("the Sync has not synced to the cluster of its kubeconfig (Secret %s, server %s) yet: its objects are read there once it has", secret, kc.Server)
		}
		return nil, cluster, fmt.Errorf("the Sync last synced to cluster %s, and its kubeconfig (Secret %s) now names %s: its objects are read once it has synced there", s.Status.Cluster, secret, kc.Server)
	}
	// And only through the proxy the agent reached it through, which it
	// checked too: a kubeconfig that now names another proxy (or one
	// where there was none) is not connected through.
	if kc.Proxy != s.Status.ClusterProxy {
		return nil, cluster, fmt.Errorf("the Sync last synced to cluster %s %s, and its kubeconfig (Secret %s) now reaches it %s: its objects are read once the Sync has synced that way",
			s.Status.Cluster, proxyWords(s.Status.ClusterProxy), secret, proxyWords(kc.Proxy))
	}
	cfg := rest.CopyConfig(kc.Config)
	cfg.Timeout = targetTimeout
	cfg.UserAgent = "driftless"
	tc, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, kc.Server, fmt.Errorf("the objects are in cluster %s, which cannot be reached: %w", kc.Server, err)
	}
	return tc, kc.Server, nil
}

// proxyWords names how a cluster is reached, for messages.
func proxyWords(proxy string) string {
	if proxy == "" {
		return "directly"
	}
	return "through proxy " + proxy
}
