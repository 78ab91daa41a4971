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

// Remote reports whether s applies to a cluster other than the agent's.
func (s *Sync) Remote() bool { return s.Spec.KubeConfig != nil }
