package v1alpha1

// ReasonClusterUnreachable: the Sync's target cluster (spec.kubeConfig)
// did not answer; nothing of the revision was written there, and the
// Sync is retried with a back-off.
const ReasonClusterUnreachable = "ClusterUnreachable"

// Default keys of a kubeconfig Secret, tried in this order when
// spec.kubeConfig.secretRef.key is empty (as Flux's kustomize-controller).
const (
	KubeConfigKey     = "value"
	KubeConfigKeyYAML = "value.yaml"
)

// KubeConfigReference makes a Sync apply to another cluster than the
// agent's: the one a kubeconfig in a Secret of the Sync's namespace names.
type KubeConfigReference struct {
	// SecretRef names the Secret and its key holding the kubeconfig. The
	// Secret is read as the Sync (as its ServiceAccount outside the
	// agent's namespace). Its current context's cluster is the target; a
	// token or a client certificate authenticates there; exec and
	// auth-provider plugins are refused.
	SecretRef SecretKeyReference `json:"secretRef"`
}

// SecretKeyReference names a key of a Secret in the Sync's namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key of the Secret's data holding the kubeconfig; empty tries
	// "value", then "value.yaml".
	// +optional
	Key string `json:"key,omitempty"`
}

// InCluster is what views show as the cluster of a Sync that applies to
// the agent's own cluster.
const InCluster = "in-cluster"

// TargetCluster says which cluster s applies to, for views: InCluster;
// the server it last synced to (status.cluster); or, before its first
// sync, the kubeconfig's Secret as "secret/<name>".
func (s *Sync) TargetCluster() string {
	switch {
	case s.Spec.KubeConfig == nil:
		return InCluster
	case s.Status.Cluster != "":
		return s.Status.Cluster
	}
	return "secret/" + s.Spec.KubeConfig.SecretRef.Name
}
