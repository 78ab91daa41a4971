package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncKind is the kind name of Sync.
const SyncKind = "Sync"

// Condition types of a Sync. Ready, Reconciling and Stalled follow kstatus.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionDrifted is True while the cluster differs from git and
	// driftless is not putting it back: in DryRun mode, with selfHeal
	// off, or while paused in a fight with another writer.
	ConditionDrifted = "Drifted"
)

// Condition reasons of a Sync.
const (
	ReasonSucceeded          = "Succeeded"
	ReasonProgressing        = "Progressing"
	ReasonSuspended          = "Suspended"
	ReasonFetchFailed        = "FetchFailed"
	ReasonBuildFailed        = "BuildFailed"
	ReasonValidationFailed   = "ValidationFailed"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonPruneFailed        = "PruneFailed"
	ReasonPruneRefused       = "PruneRefused"
	ReasonInvalidSpec        = "InvalidSpec"
	ReasonDriftDetected      = "DriftDetected"
	ReasonDriftReverted      = "DriftReverted"
	ReasonInSync             = "InSync"
	ReasonFight              = "FightDetected"
	ReasonHealthCheckFailed  = "HealthCheckFailed"
	ReasonDependencyNotReady = "DependencyNotReady"
	ReasonDependencyCycle    = "DependencyCycle"
	// ReasonConflict: an object of the render belongs to another Sync.
	ReasonConflict = "Conflict"
	// ReasonServiceAccountRequired: a Sync outside the agent's namespace
	// names no spec.serviceAccountName and the agent has no
	// --default-service-account, so it has no identity to apply with.
	ReasonServiceAccountRequired = "ServiceAccountRequired"
	// ReasonVerificationFailed: the revision (or its tag) is not signed
	// by a key of spec.source.git.verify, or those keys cannot be read.
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonAccessDenied: a Sync outside the agent's namespace names a
	// Secret or ConfigMap (spec.source.git.secretRef, substituteFrom,
	// decryption, a HelmChart's valuesFrom or chart secretRef) that its
	// ServiceAccount may not get; nothing of the revision is written.
	ReasonAccessDenied = "AccessDenied"
)

// Event reasons of image updates (spec.imageUpdate), recorded on the Sync
// with action ImageUpdate.
const (
	// ReasonImageUpdateCommitted: new image references were committed
	// and pushed to the Sync's branch (or the pull request's branch).
	ReasonImageUpdateCommitted = "ImageUpdateCommitted"
	// ReasonImageUpdatePending: Report mode found updates and committed
	// nothing.
	ReasonImageUpdatePending = "ImageUpdatePending"
	// ReasonImageUpdatePullRequest: a pull request was opened, updated or
	// closed for the updates (mode PullRequest).
	ReasonImageUpdatePullRequest = "ImageUpdatePullRequest"
	// ReasonImageUpdateFailed (Warning): a policy, the checkout, the
	// commit, the push or the forge failed.
	ReasonImageUpdateFailed = "ImageUpdateFailed"
)

// Event reasons of a Sync's deletion (see SyncSpec.DeletionPolicy).
const (
	// ReasonOrphaned: the Sync is gone and its objects stay, unlabelled.
	ReasonOrphaned = "Orphaned"
	// ReasonDeleted: the Sync is gone and so are its objects.
	ReasonDeleted = "Deleted"
	// ReasonDeletionFailed: some objects could not be deleted or
	// unlabelled yet; the Sync waits and retries.
	ReasonDeletionFailed = "DeletionFailed"
	// ReasonLeftBehind: the Sync is gone, and the objects the event names
	// were not cleaned up.
	ReasonLeftBehind = "LeftBehind"
	// ReasonInventoryMissing (Warning event): the Sync's Inventory was
	// gone while its status counted entries in it; the sync went on from
	// an empty inventory.
	ReasonInventoryMissing = "InventoryMissing"
)

// SyncMode says whether a Sync writes to the cluster.
// +kubebuilder:validation:Enum=Apply;DryRun
type SyncMode string

// Sync modes.
const (
	// ModeApply applies, prunes and reverts drift.
	ModeApply SyncMode = "Apply"
	// ModeDryRun computes the same plan and drift but writes nothing; it
	// reports what it would create, change, prune and revert.
	ModeDryRun SyncMode = "DryRun"
)

// DeletionPolicy says what happens to a Sync's objects when the Sync is
// deleted.
// +kubebuilder:validation:Enum=Orphan;Delete
type DeletionPolicy string

// Deletion policies.
const (
	// DeletionOrphan keeps the objects and removes their driftless.dev/sync
	// label, so that nothing points at the deleted Sync.
	DeletionOrphan DeletionPolicy = "Orphan"
	// DeletionDelete deletes the objects in reverse apply order, like a
	// prune of the whole inventory. Objects annotated driftless.dev/prune:
	// disabled are orphaned instead.
	DeletionDelete DeletionPolicy = "Delete"
)

// GitSource is a git repository and the ref to follow in it. Exactly one
// of Branch, Tag and Commit may be set; with none, Branch "master" is used.
// +kubebuilder:validation:XValidation:rule="(has(self.branch) ? 1 : 0) + (has(self.tag) ? 1 : 0) + (has(self.commit) ? 1 : 0) <= 1",message="set at most one of branch, tag and commit"
// +kubebuilder:validation:XValidation:rule="!has(self.verify) || !has(self.verify.mode) || self.verify.mode != 'Tag' || has(self.tag)",message="verify mode Tag needs a tag to follow: set spec.source.git.tag"
type GitSource struct {
	// URL of the repository: ssh://, https://, http://, git:// or file://
	// (file:// only for Syncs in the agent's namespace, unless the agent
	// runs with --allow-file-urls). scp-like addresses
	// (git@host:org/repo.git) are accepted for SSH.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.matches('^((?i:ssh|https?|git|file)://|/|[^/:]+:([^/]|/[^/]|$))')",message="url must start with ssh://, https://, http://, git:// or file://, or be an scp-like address such as git@github.com:org/repo.git"
	URL string `json:"url"`
	// Branch to follow.
	// +optional
	Branch string `json:"branch,omitempty"`
	// Tag to check out.
	// +optional
	Tag string `json:"tag,omitempty"`
	// Commit (full SHA-1) to check out.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	// +optional
	Commit string `json:"commit,omitempty"`
	// SecretRef names a Secret in the Sync's namespace with credentials:
	// for SSH "identity" (private key) and "known_hosts"; for HTTPS
	// "username" and "password", or "token".
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// InsecureSkipHostKeyCheck accepts any SSH host key. Without it, an
	// SSH source needs known_hosts in the Secret and an unknown host is
	// refused.
	// +optional
	InsecureSkipHostKeyCheck bool `json:"insecureSkipHostKeyCheck,omitempty"`
	// Verify, when set, refuses any revision that is not signed by a
	// trusted key: nothing of it is rendered or applied, and the Sync is
	// Stalled with reason VerificationFailed until a signed revision comes.
	// +optional
	Verify *GitVerification `json:"verify,omitempty"`
}

// VerificationMode says which git object must carry the signature.
// +kubebuilder:validation:Enum=HEAD;Tag
type VerificationMode string

// Verification modes.
const (
	// VerifyHEAD checks the signature of the commit to be applied.
	VerifyHEAD VerificationMode = "HEAD"
	// VerifyTag checks the signature of the annotated tag the Sync
	// follows (spec.source.git.tag); a lightweight tag is refused.
	VerifyTag VerificationMode = "Tag"
)

// GitVerification says which keys a revision must be signed with.
type GitVerification struct {
	// Mode is HEAD (the commit must be signed) or Tag (the annotated tag
	// in spec.source.git.tag must be signed).
	// +kubebuilder:default=HEAD
	// +optional
	Mode VerificationMode `json:"mode,omitempty"`
	// SecretRef names a Secret in the Sync's namespace holding the
	// trusted keys: "allowed_signers" (OpenSSH allowed signers format) for
	// SSH signatures and any "*.asc" keys (armored OpenPGP public keys)
	// for GPG signatures.
	SecretRef LocalObjectReference `json:"secretRef"`
}

// DependencyReference names a Sync; the namespace defaults to the
// dependent Sync's own.
type DependencyReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// SyncProgress tells how far a running sync has got.
type SyncProgress struct {
	// Revision being applied.
	Revision string `json:"revision"`
	// Wave is the driftless.dev/wave being applied or waited for; Index
	// (1-based) and Waves place it among the sync's waves.
	Wave  int `json:"wave"`
	Index int `json:"index"`
	Waves int `json:"waves"`
	// Applied and Healthy count objects so far, out of Total.
	Applied int `json:"applied"`
	Healthy int `json:"healthy"`
	Total   int `json:"total"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Source is where the desired state comes from: a git repository or an
// OCI artifact, exactly one of them.
// +kubebuilder:validation:XValidation:rule="has(self.git) != has(self.oci)",message="set exactly one of spec.source.git and spec.source.oci"
type Source struct {
	// Git is a git repository and the ref to follow in it.
	// +optional
	Git GitSource `json:"git,omitzero"`
	// OCI is an artifact in an OCI registry (see docs/sources.md).
	// +optional
	OCI *OCISource `json:"oci,omitempty"`
}

// SyncSpec is the desired state of a Sync.
// +kubebuilder:validation:XValidation:rule="!has(self.imageUpdate) || !has(self.imageUpdate.pullRequest) || !has(self.imageUpdate.branch) || self.imageUpdate.branch != (has(self.imageUpdate.pullRequest.base) && size(self.imageUpdate.pullRequest.base) > 0 ? self.imageUpdate.pullRequest.base : (has(self.source.git.branch) && size(self.source.git.branch) > 0 ? self.source.git.branch : 'master'))",message="spec.imageUpdate.branch must differ from the pull request's base (pullRequest.base, default the Sync's branch): the robot pushes to its own branch and asks to merge it into the base"
type SyncSpec struct {
	Source Source `json:"source"`
	// Paths are directories or files in the repository to apply, relative
	// to its root. Every *.yaml, *.yml and *.json under them is read,
	// recursively, except in a directory that holds a kustomization.yaml,
	// kustomization.yml or Kustomization: that directory is built with
	// Kustomize instead. Empty means the whole repository.
	// +optional
	Paths []string `json:"paths,omitempty"`
	// Interval between syncs, a Go duration such as "1m" or "1h30m".
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:default="5m"
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`
	// Timeout of one sync: fetch, render, apply and prune. A Go duration.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:default="5m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Prune deletes objects removed from git.
	// +kubebuilder:default=true
	// +optional
	Prune *bool `json:"prune,omitempty"`
	// AllowEmpty lets a render with no objects prune every object of a
	// non-empty inventory. Without it such a sync is refused.
	// +optional
	AllowEmpty bool `json:"allowEmpty,omitempty"`
	// Suspend stops syncing; the cluster is left as it is.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// Mode Apply writes; DryRun only reports what it would write.
	// +kubebuilder:default=Apply
	// +optional
	Mode SyncMode `json:"mode,omitempty"`
	// SelfHeal reverts changes made in the cluster by anyone else as soon
	// as they happen. Off, drift is reported (condition Drifted) and left
	// until the next new revision.
	// +kubebuilder:default=true
	// +optional
	SelfHeal *bool `json:"selfHeal,omitempty"`
	// Wait makes the Sync Ready only when every applied object is healthy
	// (kstatus Current: a Deployment rolled out and available, a Job
	// succeeded, …), bounded by timeout. Between waves driftless always
	// waits.
	// +optional
	Wait bool `json:"wait,omitempty"`
	// DependsOn lists Syncs that must be Ready at their latest revision
	// before this one syncs.
	// +optional
	DependsOn []DependencyReference `json:"dependsOn,omitempty"`
	// HealthChecks decide, with CEL expressions over the live object, when
	// objects of a kind are healthy in the waits for health (waves, wait,
	// and so dependsOn), instead of kstatus. The shape and semantics are
	// those of Flux's Kustomization spec.healthCheckExprs. Expressions that
	// do not compile, or whose estimated cost is over the limit, make the
	// Sync InvalidSpec (and are refused by the admission webhook).
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	HealthChecks []HealthCheck `json:"healthChecks,omitempty"`
	// TargetNamespace is given to namespaced objects that have no namespace.
	// Without it they go to "default".
	// +optional
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// DeletionPolicy says what happens to the objects of the inventory
	// when the Sync is deleted: Orphan keeps them and removes their
	// driftless.dev/sync label; Delete deletes them. A suspended Sync
	// orphans whatever its policy; a DryRun Sync, or any Sync under the
	// agent's --dry-run, writes nothing and only reports what it would do.
	// A cleanup that fails is retried until spec.timeout has passed since
	// the deletion, or until the Sync is annotated
	// driftless.dev/force-delete: enabled; then the Sync goes anyway and
	// an event names every object left behind.
	// +kubebuilder:default=Orphan
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
	// Kustomize configures the build of the directories in paths that
	// hold a kustomization.yaml.
	// +optional
	Kustomize *KustomizeSpec `json:"kustomize,omitempty"`
	// Substitute gives variables for ${name} and ${name:=default} in the
	// string values of rendered objects, after Kustomize and plain files
	// alike. It overrides SubstituteFrom. Names match
	// ^[_a-zA-Z][_a-zA-Z0-9]*$. An object annotated
	// driftless.dev/substitute: disabled is left alone.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[_a-zA-Z][_a-zA-Z0-9]*$'))",message="variable names must match ^[_a-zA-Z][_a-zA-Z0-9]*$"
	// +optional
	Substitute map[string]string `json:"substitute,omitempty"`
	// ServiceAccountName is a ServiceAccount of the Sync's namespace:
	// every request for the Sync's objects (server-side dry-run, apply,
	// prune, health checks, drift reverts, the cleanup of deletionPolicy)
	// impersonates it, so the Sync may do only what that account may do.
	// Empty: a Sync in the agent's namespace uses the agent's identity; a
	// Sync elsewhere uses the agent's --default-service-account, or is
	// refused (Stalled, ServiceAccountRequired) when there is none.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// SubstituteFrom reads variables from the data of ConfigMaps and
	// Secrets in the Sync's namespace, in order: a later entry overrides
	// an earlier one. Values from Secrets are never shown in errors,
	// events or status.
	// +optional
	SubstituteFrom []SubstituteReference `json:"substituteFrom,omitempty"`
	// ImageUpdate, when set, rewrites image markers in the Sync's paths to
	// the tags their ImagePolicies select (see docs/image-automation.md).
	// +optional
	ImageUpdate *ImageUpdateSpec `json:"imageUpdate,omitempty"`
	// Decryption decrypts the files in paths encrypted with SOPS, in
	// memory, at render time: manifests, and every file a kustomization
	// reads. Without it, a Sync whose paths hold an encrypted file fails
	// (BuildFailed), naming the file.
	// +optional
	Decryption *Decryption `json:"decryption,omitempty"`
	// KubeConfig makes the Sync apply to another cluster: the one of the
	// kubeconfig in a Secret of the Sync's namespace (see
	// docs/remote-clusters.md). Validation, apply, prune, health waits and
	// drift watches all talk to that cluster, and serviceAccountName is
	// impersonated there. The Sync, its status and its Inventory stay in
	// the agent's cluster.
	// +optional
	KubeConfig *KubeConfigReference `json:"kubeConfig,omitempty"`
}

// Decryption says how to decrypt a Sync's encrypted files.
type Decryption struct {
	// Provider is sops, the only one.
	// +kubebuilder:validation:Enum=sops
	// +kubebuilder:default=sops
	// +optional
	Provider string `json:"provider,omitempty"`
	// SecretRef names a Secret in the Sync's namespace whose entries
	// ending in .agekey hold age identities (one or more a line). Without
	// it, a Sync in the agent's own namespace uses the agent's default
	// key Secret (--sops-age-key-secret), and any other Sync fails.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// SubstituteReference names a ConfigMap or Secret in the Sync's namespace
// whose data are variables.
type SubstituteReference struct {
	// Kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Optional lets the sync go on without the object when it does not
	// exist. Without it a missing object fails the sync (BuildFailed).
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// KustomizeSpec configures how a Sync builds kustomizations.
type KustomizeSpec struct {
	// AllowRemote lets kustomizations of the Sync's repository name remote
	// bases and components of git form in resources and components
	// (https://host/org/repo//path?ref=v1, ssh://, git@host:org/repo,
	// file:// where the Sync may read file:// sources). driftless fetches
	// them itself, anonymously or, on the host of the Sync's repository,
	// with its secretRef; a branch ref is followed at every sync, a tag or
	// commit is pinned. Single files over HTTP and remote files in other
	// fields stay refused. Without it every remote reference is refused.
	// +optional
	AllowRemote bool `json:"allowRemote,omitempty"`
}

// InventoryEntry identifies one object a Sync applied.
type InventoryEntry struct {
	// ID is "<group>/<Kind>/<namespace>/<name>" (or the legacy
	// "<namespace>_<name>_<group>_<kind>").
	ID string `json:"id"`
	// Version is the API version the object was applied with.
	Version string `json:"v"`
	// Wave is the wave it was applied in (prune goes in reverse wave order).
	// +optional
	Wave int `json:"w,omitempty"`
}

// SyncResult is the outcome of one sync attempt.
// +kubebuilder:validation:Enum=Succeeded;Failed
type SyncResult string

// Sync results.
const (
	ResultSucceeded SyncResult = "Succeeded"
	ResultFailed    SyncResult = "Failed"
)

// SyncRecord describes one sync attempt.
type SyncRecord struct {
	Revision  string      `json:"revision"`
	StartedAt metav1.Time `json:"startedAt"`
	// Duration of the attempt, such as "1.2s".
	Duration string     `json:"duration"`
	Result   SyncResult `json:"result"`
	// Reason is the Ready condition's reason after the attempt.
	// +optional
	Reason     string `json:"reason,omitempty"`
	Created    int    `json:"created"`
	Configured int    `json:"configured"`
	Unchanged  int    `json:"unchanged"`
	Pruned     int    `json:"pruned"`
	// Adopted counts objects that existed without a driftless.dev/sync
	// label and were taken over by this sync.
	// +optional
	Adopted int `json:"adopted,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Subject is the first line of the synced commit's message, at most
	// MaxSubject characters; Author is the commit's author name. Empty
	// when the attempt failed before the commit was fetched.
	// +optional
	Subject string `json:"subject,omitempty"`
	// +optional
	Author string `json:"author,omitempty"`
	// Changes lists the objects the attempt created, configured or pruned
	// (for a dry run: would have), at most MaxRecordChanges of them;
	// MoreChanges counts the others.
	// +optional
	Changes []ObjectChange `json:"changes,omitempty"`
	// +optional
	MoreChanges int `json:"moreChanges,omitempty"`
}

// ObjectChange is one object a sync changed.
type ObjectChange struct {
	// Action is Created, Configured or Pruned.
	Action string `json:"action"`
	// Object is "Kind/namespace/name", or "Kind/name" for a cluster-scoped
	// object.
	Object string `json:"object"`
}

// MaxHistory is how many SyncRecords a Sync keeps.
const MaxHistory = 10

// MaxRecordChanges bounds SyncRecord.Changes; MaxSubject bounds
// SyncRecord.Subject.
const (
	MaxRecordChanges = 20
	MaxSubject       = 120
)

// DriftAction is what driftless did about a drift.
// +kubebuilder:validation:Enum=Reverted;Reported;Paused
type DriftAction string

// Drift actions.
const (
	DriftReverted DriftAction = "Reverted"
	// DriftReported: detected and left (DryRun, selfHeal off).
	DriftReported DriftAction = "Reported"
	// DriftPaused: another writer keeps changing the object; reverts are
	// paused for a while.
	DriftPaused DriftAction = "Paused"
)

// DriftField is one field found different from git.
type DriftField struct {
	// Path such as spec.template.spec.containers[app].resources.limits.memory.
	Path string `json:"path"`
	// Git is the value in git; Found the value found ("***" for Secret data).
	Git   string `json:"git"`
	Found string `json:"found"`
	// Manager is the field manager that set the found value.
	// +optional
	Manager string `json:"manager,omitempty"`
	// ChangedAt is when that manager wrote the object.
	// +optional
	ChangedAt *metav1.Time `json:"changedAt,omitempty"`
}

// DriftIncident is one change made in the cluster to a managed object.
type DriftIncident struct {
	Time metav1.Time `json:"time"`
	// Object is Kind/namespace/name.
	Object string `json:"object"`
	// Origin is the file in git that defines the object.
	// +optional
	Origin string      `json:"origin,omitempty"`
	Action DriftAction `json:"action"`
	// +optional
	Fields []DriftField `json:"fields,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// MaxDrift is how many DriftIncidents a Sync keeps.
const MaxDrift = 20

// SyncStatus is the observed state of a Sync.
type SyncStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Cluster is the server (scheme and host) of the cluster of
	// spec.kubeConfig the Sync last synced to; empty for the agent's own.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// ClusterProxy is the proxy-url (scheme and host) of the kubeconfig
	// through which the agent last reached Cluster; empty when it
	// connected directly. Views connect to Cluster only through it.
	// +optional
	ClusterProxy string `json:"clusterProxy,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastAppliedRevision is the revision last applied successfully.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
	// LastAppliedGeneration is the generation of the spec last applied
	// successfully. ObservedGeneration is also recorded after a failure;
	// this is not, so a spec change is applied once it can be.
	// +optional
	LastAppliedGeneration int64 `json:"lastAppliedGeneration,omitempty"`
	// LastComparedAt is when a sync last compared every live object of
	// the Sync with git (reading each one, as the first sync after a
	// start, a resume, a switch to Apply, `driftless reconcile` and the
	// full resync do). Syncs in between trust the drift watches for objects
	// git did not change; the Drifted condition says which it was.
	// +optional
	LastComparedAt *metav1.Time `json:"lastComparedAt,omitempty"`
	// LastAttemptedRevision is the revision of the last attempt.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// InventoryRef names the Inventory (same namespace) that lists the
	// objects the Sync applied, and counts them.
	// +optional
	InventoryRef *InventoryRef `json:"inventoryRef,omitempty"`
	// Inventory is where agents before the Inventory kind listed the
	// objects applied. The agent reads it once, moves it to the Inventory
	// named by inventoryRef and clears it; it never writes it.
	// +optional
	Inventory []InventoryEntry `json:"inventory,omitempty"`
	// History holds the last syncs, newest first.
	// +optional
	History []SyncRecord `json:"history,omitempty"`
	// Drift holds the last drift incidents, newest first.
	// +optional
	Drift []DriftIncident `json:"drift,omitempty"`
	// Progress is set while a sync applies waves or waits for health.
	// +optional
	Progress *SyncProgress `json:"progress,omitempty"`
	// ImageUpdate is the last image update (spec.imageUpdate).
	// +optional
	ImageUpdate *ImageUpdateStatus `json:"imageUpdate,omitempty"`
	// Hold is set while the Sync is held at a revision (HoldAnnotation,
	// `driftless hold`) and that revision is what it applies.
	// +optional
	Hold *HoldStatus `json:"hold,omitempty"`
}

// Sync keeps a set of objects in the cluster equal to paths in a git
// repository: it applies them with server-side apply, prunes what was
// removed, and reports every sync in its status and events.
//
// Its name is at most 61 characters, so that the driftless.dev/sync label
// value "<namespace>.<name>" can fit in 63. The CRD cannot see the
// namespace (CEL rules of a CRD only see metadata.name); the agent refuses
// a longer "<namespace>.<name>" with reason InvalidSpec before any write.
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 61",message="metadata.name must be at most 61 characters: objects are labelled driftless.dev/sync=<namespace>.<name>, a label value of at most 63 characters"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=driftless
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.lastAppliedRevision`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SyncSpec `json:"spec"`
	// +optional
	Status SyncStatus `json:"status,omitempty"`
}

// SyncList is a list of Syncs.
// +kubebuilder:object:root=true
type SyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sync `json:"items"`
}

// PruneEnabled reports whether spec.prune is on (the default).
func (s *Sync) PruneEnabled() bool { return s.Spec.Prune == nil || *s.Spec.Prune }

// DryRun reports whether the Sync only reports (spec.mode: DryRun).
func (s *Sync) DryRun() bool { return s.Spec.Mode == ModeDryRun }

// SelfHealEnabled reports whether spec.selfHeal is on (the default).
func (s *Sync) SelfHealEnabled() bool { return s.Spec.SelfHeal == nil || *s.Spec.SelfHeal }

// LabelValue is the SyncLabel value of this Sync.
func (s *Sync) LabelValue() string { return SyncLabelValue(s.Namespace, s.Name) }

// HealthCheck decides the health of the objects of one kind (or of every
// kind of a group, when kind is empty) with CEL expressions. Each
// expression sees the object as self and its top-level fields (apiVersion,
// kind, metadata, spec, status) by name, and must return a bool.
// The object is InProgress while status.observedGeneration differs from
// metadata.generation; otherwise inProgress, failed and current are
// evaluated in that order and the first that is true decides; none true
// is InProgress.
type HealthCheck struct {
	// APIVersion of the objects checked, such as example.com/v1; only its
	// group is compared.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind of the objects checked; empty: every kind of the group.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Current is true when the object is healthy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Current string `json:"current"`
	// InProgress is true while the object is on its way.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	InProgress string `json:"inProgress,omitempty"`
	// Failed is true when the object will not become healthy: the wait
	// ends at once and the sync fails with HealthCheckFailed.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Failed string `json:"failed,omitempty"`
}
