package engine

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

// ErrKubeConfigUnreadable wraps an error of the API server while reading
// the Secret of spec.kubeConfig: unlike a missing Secret or a refused
// kubeconfig, a retry may succeed.
var ErrKubeConfigUnreadable = errors.New("kubeconfig could not be read")

// KubeConfig is the cluster a Sync's spec.kubeConfig names.
type KubeConfig struct {
	// Config reaches the cluster with the kubeconfig's credentials.
	Config *rest.Config
	// Server is the cluster's address without credentials, for messages.
	Server string
	// Proxy is the address of the kubeconfig's proxy-url without
	// credentials, or "" when it names none.
	Proxy string
	// Secret is the Secret it was read from, and Version that Secret's
	// resourceVersion: a client built from Config stays good while the
	// Secret is at Version.
	Secret  client.ObjectKey
	Key     string
	Version string
}

// ReadKubeConfig reads the kubeconfig of s's spec.kubeConfig with reader
// (as the Sync: see Reader) and parses it (ParseKubeConfig). It returns
// nil when s sets no spec.kubeConfig. Errors name the Secret and key,
// never what the Secret holds; an API error reading it wraps
// ErrKubeConfigUnreadable.
func ReadKubeConfig(ctx context.Context, reader Reader, s *v1alpha1.Sync) (*KubeConfig, error) {
	if s.Spec.KubeConfig == nil {
		return nil, nil
	}
	ref := s.Spec.KubeConfig.SecretRef
	key := client.ObjectKey{Namespace: s.Namespace, Name: ref.Name}
	var sec corev1.Secret
	err := reader.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("spec.kubeConfig names Secret %s, which does not exist: create it with the target cluster's kubeconfig under the key %q (docs/remote-clusters.md)", key, keyOrDefault(ref.Key))
	case err != nil:
		return nil, fmt.Errorf("%w: read spec.kubeConfig's Secret %s: %w", ErrKubeConfigUnreadable, key, err)
	}
	dataKey := ref.Key
	if dataKey == "" {
		dataKey = v1alpha1.KubeConfigKey
		if _, ok := sec.Data[dataKey]; !ok {
			dataKey = v1alpha1.KubeConfigKeyYAML
		}
	}
	data, ok := sec.Data[dataKey]
	if !ok {
		return nil, fmt.Errorf("spec.kubeConfig's Secret %s has no key %s: put the kubeconfig under that key, or set spec.kubeConfig.secretRef.key", key, keyOrDefault(ref.Key))
	}
	kc, err := ParseKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("spec.kubeConfig's Secret %s, key %s, %w", key, dataKey, err)
	}
	kc.Secret, kc.Key, kc.Version = key, dataKey, sec.ResourceVersion
	return kc, nil
}

// CheckHosts returns a *source.HostNotAllowedError when hosts (the
// agent's --tenant-source-hosts, for a tenant's Sync) does not allow the
// host of the server or of the proxy-url the kubeconfig reaches it
// through.
func (kc *KubeConfig) CheckHosts(hosts source.Hosts) error {
	if err := hosts.CheckURL(fmt.Sprintf("the server of spec.kubeConfig (Secret %s)", kc.Secret), kc.Server); err != nil {
		return err
	}
	if kc.Proxy == "" {
		return nil
	}
	return hosts.CheckURL(fmt.Sprintf("the proxy-url of spec.kubeConfig (Secret %s)", kc.Secret), kc.Proxy)
}

func keyOrDefault(k string) string {
	if k != "" {
		return fmt.Sprintf("%q", k)
	}
	return fmt.Sprintf("%q (or %q)", v1alpha1.KubeConfigKey, v1alpha1.KubeConfigKeyYAML)
}

// ParseKubeConfig turns a kubeconfig into a client configuration for the
// cluster of its current context, with that cluster's server address and
// proxy-url (scheme and host, without credentials or path); the Secret's
// fields are left empty. Only what the kubeconfig itself holds is used: a
// bearer token, a client certificate and key, or a user name and
// password, and the server's CA. Exec and auth-provider
// plugins (which would run programs in the agent) and paths to files
// (which would read the agent's own files, its token among them) are
// refused. No error quotes the kubeconfig's content.
func ParseKubeConfig(data []byte) (*KubeConfig, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		// The parser's message may quote the document: say only what.
		return nil, errors.New("is not a kubeconfig (YAML or JSON of kind Config)")
	}
	if err := checkKubeConfig(raw); err != nil {
		return nil, err
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot be used: %w", err)
	}
	kc := &KubeConfig{Config: cfg, Server: ServerOf(cluster.Server)}
	if cluster.ProxyURL != "" {
		kc.Proxy = ServerOf(cluster.ProxyURL)
	}
	return kc, nil
}

// checkKubeConfig refuses what ParseKubeConfig does not take.
func checkKubeConfig(raw *clientcmdapi.Config) error {
	if raw.CurrentContext == "" {
		return errors.New("names no current-context; set current-context to the context of the target cluster")
	}
	ctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok {
		return fmt.Errorf("has no context %q, its current-context", raw.CurrentContext)
	}
	cluster, ok := raw.Clusters[ctx.Cluster]
	if !ok {
		return fmt.Errorf("has no cluster %q, which context %q names", ctx.Cluster, raw.CurrentContext)
	}
	if cluster.Server == "" {
		return fmt.Errorf("cluster %q has no server", ctx.Cluster)
	}
	if u, err := url.Parse(cluster.Server); err != nil || u.Host == "" {
		return fmt.Errorf("cluster %q has a server that is not a URL such as https://host:6443", ctx.Cluster)
	}
	if cluster.CertificateAuthority != "" {
		return fmt.Errorf("cluster %q reads its CA from the file %q, which the agent does not read: put it in certificate-authority-data", ctx.Cluster, cluster.CertificateAuthority)
	}
	user := raw.AuthInfos[ctx.AuthInfo]
	if user == nil {
		return fmt.Errorf("has no user %q, which context %q names", ctx.AuthInfo, raw.CurrentContext)
	}
	switch {
	case user.Exec != nil:
		return fmt.Errorf("user %q runs an exec plugin, which the agent refuses to run: use a ServiceAccount token or a client certificate (docs/remote-clusters.md)", ctx.AuthInfo)
	case user.AuthProvider != nil:
		return fmt.Errorf("user %q uses the auth-provider plugin %q, which the agent refuses to run: use a ServiceAccount token or a client certificate (docs/remote-clusters.md)", ctx.AuthInfo, user.AuthProvider.Name)
	case user.TokenFile != "" || user.ClientCertificate != "" || user.ClientKey != "":
		return fmt.Errorf("user %q reads its credentials from files, which the agent does not read: put them in token, client-certificate-data and client-key-data", ctx.AuthInfo)
	case user.Token == "" && len(user.ClientCertificateData) == 0 && user.Username == "":
		return fmt.Errorf("user %q has no credentials: give it a token, or client-certificate-data and client-key-data", ctx.AuthInfo)
	}
	return nil
}

// ServerOf returns the scheme and host of a server address, without
// credentials or path: what messages may name.
func ServerOf(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return "(an address that cannot be read)"
	}
	return u.Scheme + "://" + u.Host
}
