package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImagePolicyKind is the kind name of ImagePolicy.
const ImagePolicyKind = "ImagePolicy"

// Condition reasons of an ImagePolicy.
const (
	// ReasonScanFailed: the registry could not be reached or refused the
	// credentials; the policy keeps its last selection and retries.
	ReasonScanFailed = "ScanFailed"
	// ReasonNoMatchingTag: the registry answered, and no tag passed the
	// filter, the exclusions and the policy.
	ReasonNoMatchingTag = "NoMatchingTag"
	// ReasonTagSelected: a tag was selected (and its digest resolved).
	ReasonTagSelected = "TagSelected"
)

// SortOrder is the order of an alphabetical or numerical policy.
// +kubebuilder:validation:Enum=asc;desc
type SortOrder string

// Sort orders; asc selects the last tag in ascending order (the highest).
const (
	OrderAsc  SortOrder = "asc"
	OrderDesc SortOrder = "desc"
)

// SemVerPolicy selects the highest tag that is a semantic version within
// Range.
type SemVerPolicy struct {
	// Range is a semver constraint, e.g. ">=1.2 <2", "~1.2", "^1".
	// +kubebuilder:validation:MinLength=1
	Range string `json:"range"`
}

// OrderPolicy selects the first tag of the given order: asc (the default)
// selects the highest, desc the lowest.
type OrderPolicy struct {
	// +optional
	Order SortOrder `json:"order,omitempty"`
}

// ImagePolicyChoice is exactly one way of ordering tags.
// +kubebuilder:validation:XValidation:rule="(has(self.semver) ? 1 : 0) + (has(self.alphabetical) ? 1 : 0) + (has(self.numerical) ? 1 : 0) == 1",message="set exactly one of semver, alphabetical or numerical"
type ImagePolicyChoice struct {
	// +optional
	SemVer *SemVerPolicy `json:"semver,omitempty"`
	// +optional
	Alphabetical *OrderPolicy `json:"alphabetical,omitempty"`
	// +optional
	Numerical *OrderPolicy `json:"numerical,omitempty"`
}

// TagFilter keeps the tags that match Pattern and orders them by the
// value Extract makes of the match (the whole tag by default).
type TagFilter struct {
	// Pattern is a Go regular expression a tag must match.
	// +kubebuilder:validation:MinLength=1
	Pattern string `json:"pattern"`
	// Extract is a template of the match, e.g. "$ts" for a named group
	// (?P<ts>...); the policy orders tags by it.
	// +optional
	Extract string `json:"extract,omitempty"`
}

// ImagePolicySpec says which image repository to scan and how to choose
// its tag.
type ImagePolicySpec struct {
	// Image is the repository, e.g. "registry.example.com/team/app",
	// without a tag.
	// +kubebuilder:validation:MinLength=1
	Image  string            `json:"image"`
	Policy ImagePolicyChoice `json:"policy"`
	// +optional
	FilterTags *TagFilter `json:"filterTags,omitempty"`
	// Exclude lists regular expressions; a tag matching any is ignored
	// (e.g. "-rc").
	// +optional
	Exclude []string `json:"exclude,omitempty"`
	// Interval between two scans of the registry. Default 5m.
	// +optional
	Interval metav1.Duration `json:"interval,omitempty"`
	// SecretRef names a Secret in the policy's namespace with registry
	// credentials: type kubernetes.io/dockerconfigjson (key
	// .dockerconfigjson), or keys username and password.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Insecure allows a plain-HTTP registry.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// Suspend stops scanning; the last selection stays in the status.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// ImagePolicyStatus is the policy's last scan and its selection.
type ImagePolicyStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LatestTag is the selected tag.
	// +optional
	LatestTag string `json:"latestTag,omitempty"`
	// LatestDigest is the digest of LatestTag when it was selected.
	// +optional
	LatestDigest string `json:"latestDigest,omitempty"`
	// SeenAt is when LatestTag was first selected.
	// +optional
	SeenAt *metav1.Time `json:"seenAt,omitempty"`
	// LastScan is when the registry last answered.
	// +optional
	LastScan *metav1.Time `json:"lastScan,omitempty"`
	// TagsConsidered is how many tags the last scan listed.
	// +optional
	TagsConsidered int `json:"tagsConsidered,omitempty"`
	// TagsSkipped is how many of them did not parse under the policy.
	// +optional
	TagsSkipped int `json:"tagsSkipped,omitempty"`
}

// ImagePolicy scans an image repository and selects its latest tag by a
// policy; markers in git that name it are rewritten to that tag by the
// Sync that owns them (spec.imageUpdate).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=driftless
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Latest",type=string,JSONPath=`.status.latestTag`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ImagePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ImagePolicySpec `json:"spec"`
	// +optional
	Status ImagePolicyStatus `json:"status,omitempty"`
}

// ImagePolicyList is a list of ImagePolicies.
// +kubebuilder:object:root=true
type ImagePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImagePolicy `json:"items"`
}

// ImageUpdateMode says whether a Sync's image update commits.
// +kubebuilder:validation:Enum=Commit;Report;PullRequest
type ImageUpdateMode string

// Image update modes.
const (
	ImageUpdateCommit ImageUpdateMode = "Commit"
	ImageUpdateReport ImageUpdateMode = "Report"
	// ImageUpdatePullRequest commits on top of the base branch, force-
	// pushes imageUpdate.branch and opens (or updates) one pull request.
	ImageUpdatePullRequest ImageUpdateMode = "PullRequest"
)

// PullRequestProvider is the API a pull request is opened with.
// +kubebuilder:validation:Enum=github;gitlab;gitea
type PullRequestProvider string

// Pull request providers.
const (
	ProviderGitHub PullRequestProvider = "github"
	ProviderGitLab PullRequestProvider = "gitlab"
	ProviderGitea  PullRequestProvider = "gitea"
)

// PullRequestSpec says where and how PullRequest mode opens its pull
// (GitLab: merge) request.
type PullRequestSpec struct {
	// Provider is github, gitlab or gitea.
	Provider PullRequestProvider `json:"provider"`
	// Address is the API base URL, on the host of the Sync's git URL:
	// default https://api.github.com for github and
	// https://gitlab.com/api/v4 for gitlab; required for gitea (such as
	// https://gitea.example.com/api/v1).
	// +optional
	// +kubebuilder:validation:Pattern=`^https?://`
	Address string `json:"address,omitempty"`
	// Insecure allows an http:// address on a host that is not loopback
	// (127.0.0.0/8, ::1, localhost): the token then crosses the network
	// in clear. Without it such an address is refused before any request.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// TokenSecretRef names a Secret in the Sync's namespace whose entry
	// token is the API token.
	TokenSecretRef LocalObjectReference `json:"tokenSecretRef"`
	// Base is the branch the request merges into, and the branch the
	// robot's commit is made on top of; default the Sync's branch.
	// +optional
	Base string `json:"base,omitempty"`
	// Title is a Go template of the request's title over {.Changes,
	// .Images}; default "Update images: " and the new images.
	// +optional
	Title string `json:"title,omitempty"`
	// Labels are added to the request when it is opened.
	// +optional
	Labels []string `json:"labels,omitempty"`
}

// CommitAuthor is the author of image update commits.
type CommitAuthor struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Email string `json:"email"`
}

// ImageUpdateSpec turns on image automation for a Sync: markers in its
// paths that name an ImagePolicy are rewritten to the policy's tag.
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'PullRequest' || (has(self.pullRequest) && has(self.branch) && size(self.branch) > 0)",message="mode PullRequest needs pullRequest and branch (the robot's branch, which the pull request merges from)"
// +kubebuilder:validation:XValidation:rule="!has(self.pullRequest) || (has(self.mode) && self.mode == 'PullRequest')",message="pullRequest is used only in mode PullRequest: set mode: PullRequest or remove pullRequest"
type ImageUpdateSpec struct {
	// Mode is Report (the default: status and events say what would be
	// committed), Commit (commit and push) or PullRequest (commit on top
	// of pullRequest.base, force-push branch, open one pull request).
	// +optional
	Mode ImageUpdateMode `json:"mode,omitempty"`
	// Branch to push to; default the Sync's branch. Required in
	// PullRequest mode, where it is the robot's branch and must differ
	// from the base.
	// +optional
	Branch string `json:"branch,omitempty"`
	// PullRequest configures PullRequest mode.
	// +optional
	PullRequest *PullRequestSpec `json:"pullRequest,omitempty"`
	// Author of the commits; default driftless <driftless@localhost>.
	// +optional
	Author *CommitAuthor `json:"author,omitempty"`
	// Message is a Go template of the commit message; its data is
	// {.Changes} with fields File, Line, Image, Old, New, Policy.
	// +optional
	Message string `json:"message,omitempty"`
	// SigningKey signs the commits with an OpenPGP key. Without it,
	// commits are not signed.
	// +optional
	SigningKey *SigningKey `json:"signingKey,omitempty"`
}

// SigningKey names the Secret that holds the key commits are signed with.
type SigningKey struct {
	// SecretRef names a Secret in the Sync's namespace whose entry
	// git.asc is an armored OpenPGP private key without a passphrase
	// (gpg --armor --export-secret-keys KEYID).
	SecretRef LocalObjectReference `json:"secretRef"`
}

// ImageChange is one marker whose value would change.
type ImageChange struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Image  string `json:"image"`
	Old    string `json:"old"`
	New    string `json:"new"`
	Policy string `json:"policy"`
}

// ImageUpdateStatus is the last image update of a Sync.
type ImageUpdateStatus struct {
	// Pending lists what Report mode would commit.
	// +optional
	Pending []ImageChange `json:"pending,omitempty"`
	// LastCommit is the commit the last update pushed.
	// +optional
	LastCommit string `json:"lastCommit,omitempty"`
	// LastUpdate is when markers were last checked.
	// +optional
	LastUpdate *metav1.Time `json:"lastUpdate,omitempty"`
	// Problems lists markers that could not be applied (file:line: why).
	// +optional
	Problems []string `json:"problems,omitempty"`
	// PullRequest is the request PullRequest mode opened last.
	// +optional
	PullRequest *PullRequestStatus `json:"pullRequest,omitempty"`
}

// PullRequestState is where a pull request stands.
type PullRequestState string

// Pull request states.
const (
	PullRequestOpen   PullRequestState = "Open"
	PullRequestClosed PullRequestState = "Closed"
	PullRequestMerged PullRequestState = "Merged"
)

// PullRequestStatus names a pull (merge) request of PullRequest mode.
type PullRequestStatus struct {
	// Number is the request's number (GitLab: its iid).
	Number int `json:"number"`
	// URL is its web page.
	// +optional
	URL string `json:"url,omitempty"`
	// State is Open, Closed or Merged.
	State PullRequestState `json:"state"`
	// Commit is the robot branch's commit the request was last given.
	// +optional
	Commit string `json:"commit,omitempty"`
}

// ImageUpdateModeOrDefault is the mode, Report when unset.
func (u *ImageUpdateSpec) ImageUpdateModeOrDefault() ImageUpdateMode {
	if u.Mode == "" {
		return ImageUpdateReport
	}
	return u.Mode
}
