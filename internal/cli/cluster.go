package cli

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/spf13/cobra"
)

// Every command that talks to a cluster, the agent included, finds it by
// one rule, kubectl's: --kubeconfig, else $KUBECONFIG or ~/.kube/config,
// else the in-cluster config of the pod it runs in. Inside a pod with no
// kubeconfig (the agent's Deployment) that is the pod's service account;
// a kubeconfig given there is meant, so it wins.

// kubeconfigUsage is the --kubeconfig help of every command.
const kubeconfigUsage = "kubeconfig file; default: $KUBECONFIG, then ~/.kube/config, then the in-cluster config"

// contextUsage is the --context help of every command.
const contextUsage = "kubeconfig context to use (default: the kubeconfig's current context)"

// clusterFlags are --kubeconfig and --context, as kubectl has them.
type clusterFlags struct {
	kubeconfig string
	context    string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	cmd.Flags().StringVar(&f.context, "context", "", contextUsage)
}

// inClusterConfig is rest.InClusterConfig; tests stand in for a pod.
var inClusterConfig = rest.InClusterConfig

// inClusterNamespaceFile holds the namespace of the pod's service account.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// clusterConfig is the cluster the flags name, with the namespace of the
// kubeconfig context ("default" when it names none; the pod's in a
// cluster), and whether it is the in-cluster config.
type clusterConfig struct {
	rest      *rest.Config
	namespace string
	inCluster bool
}

// load finds the cluster of the flags by the rule above.
func (f clusterFlags) load() (clusterConfig, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	raw, err := rules.Load()
	if err != nil {
		return clusterConfig{}, fmt.Errorf("load kubeconfig: %w; pass --kubeconfig with a readable kubeconfig file", err)
	}
	if f.kubeconfig == "" && f.context == "" && clientcmdapi.IsConfigEmpty(raw) {
		if cfg, err := inClusterConfig(); err == nil {
			return clusterConfig{rest: cfg, namespace: podNamespace(), inCluster: true}, nil
		}
	}
	cc := clientcmd.NewNonInteractiveClientConfig(*raw, f.context, &clientcmd.ConfigOverrides{CurrentContext: f.context}, rules)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return clusterConfig{}, fmt.Errorf("load kubeconfig: %w; pass --kubeconfig, or --context with a context the kubeconfig has, or run in a cluster", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return clusterConfig{rest: cfg, namespace: ns}, nil
}

// podNamespace is the namespace of the pod, as client-go reads it.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

// cluster is a connection to the API server of the flags.
type cluster struct {
	client client.WithWatch
	// mapper resolves kinds, resources and their short names (deploy) as
	// kubectl does, from the server's discovery, cached.
	mapper    meta.RESTMapper
	discovery discovery.DiscoveryInterface
	namespace string
	host      string
}

// connect returns a client for the cluster of the flags that reads any
// kind it serves, typed for the kinds of client-go and driftless.
func (f clusterFlags) connect() (*cluster, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, err
	}
	return connectREST(cfg.rest, cfg.namespace)
}

// connectREST connects to the API server of rc; namespace is its
// kubeconfig context's, for messages and defaults.
func connectREST(rc *rest.Config, namespace string) (*cluster, error) {
	host := rc.Host
	scheme := v1alpha1.NewScheme()
	httpClient, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server %s: %w", host, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(rc, httpClient)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server %s: %w", host, err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("connect to the API server %s: %w", host, err)
	}
	return &cluster{client: c, mapper: mapper, discovery: dc, namespace: namespace, host: host}, nil
}

// syncClient connects to the cluster of the flags. It also returns the
// namespace of the kubeconfig context and the API server's address, for
// messages.
func (f *clusterFlags) syncClient() (client.WithWatch, string, string, error) {
	cl, err := f.connect()
	if err != nil {
		return nil, "", "", err
	}
	return cl.client, cl.namespace, cl.host, nil
}
