package v1alpha1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of spec.interval and spec.timeout, for a Sync the API server
// did not default (the CRD's +kubebuilder:default values are the same).
const (
	DefaultInterval = 5 * time.Minute
	DefaultTimeout  = 5 * time.Minute
)

// Labels and annotations on managed objects.
const (
	// SyncLabel marks an object as managed by a Sync; its value is
	// "<sync-namespace>.<sync-name>". Watches select on it and prune only
	// deletes objects that carry the pruning Sync's value.
	SyncLabel = "driftless.dev/sync"
	// OriginAnnotation says where in git an object came from:
	// "<path>#<document index>@<short revision>", or for an object a
	// kustomization built "<kustomization file> → <file>@<short revision>".
	OriginAnnotation = "driftless.dev/origin"
	// PruneAnnotation set to "disabled" keeps an object when it is removed
	// from git.
	PruneAnnotation = "driftless.dev/prune"
	// ForceAnnotation set to "enabled" lets driftless delete and re-create
	// an object whose change touches an immutable field.
	ForceAnnotation = "driftless.dev/force"
	// ReconcileAnnotation set to "disabled" makes driftless leave an
	// existing object alone.
	ReconcileAnnotation = "driftless.dev/reconcile"

	// Disabled and Enabled are the values of the opt-in/opt-out annotations.
	Disabled = "disabled"
	Enabled  = "enabled"
)

// SyncLabelValue is the SyncLabel value for the Sync namespace/name.
func SyncLabelValue(namespace, name string) string { return namespace + "." + name }

// SyncOf returns the Sync that obj's SyncLabel names; false when it names
// none.
func SyncOf(obj metav1.Object) (types.NamespacedName, bool) {
	// Namespaces cannot contain dots, so the first one separates the
	// Sync's namespace from its name.
	ns, name, ok := strings.Cut(obj.GetLabels()[SyncLabel], ".")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// IgnoreFieldsAnnotation lists JSON pointers (comma-separated) of fields
// driftless neither writes nor treats as drift, such as /spec/replicas
// under an autoscaler.
const IgnoreFieldsAnnotation = "driftless.dev/ignore-fields"

// WaveAnnotation puts an object in a wave: "<int>", default "0". Wave N+1
// is applied only when wave N is applied and healthy.
const WaveAnnotation = "driftless.dev/wave"

// Finalizer keeps a deleted Sync until its objects are orphaned or
// deleted, as spec.deletionPolicy says.
const Finalizer = "driftless.dev/finalizer"

// ForceDeleteAnnotation set to "enabled" on a Sync being deleted stops
// the cleanup of its objects at the next attempt: the Sync goes and an
// event names the objects left behind.
const ForceDeleteAnnotation = "driftless.dev/force-delete"

// SubstituteAnnotation set to "disabled" on an object leaves its ${...}
// as they are: spec.substitute and spec.substituteFrom are not applied to it.
const SubstituteAnnotation = "driftless.dev/substitute"

// CommitStatusRepositoryAnnotation on a Sync names the repository its
// commit statuses are posted to ("owner/repo", or a GitLab project path
// or ID) when its git URL does not say it: a mirror, another host name.
const CommitStatusRepositoryAnnotation = "driftless.dev/commit-status-repository"
