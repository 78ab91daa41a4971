package v1alpha1

// OCISource is an OCI artifact in a registry, as `flux push artifact` or
// `driftless push artifact` make it: one gzipped tarball layer whose
// files are rendered like a git checkout. At most one of Tag, SemVer and
// Digest may be set; with none, tag "latest" is followed.
// +kubebuilder:validation:XValidation:rule="(has(self.tag) ? 1 : 0) + (has(self.semver) ? 1 : 0) + (has(self.digest) ? 1 : 0) <= 1",message="set at most one of tag, semver and digest"
type OCISource struct {
	// URL of the repository in the registry: oci://<host>/<path>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.matches('^oci://[^/]+/.+$')",message="url must be oci://<registry host>/<repository>, such as oci://ghcr.io/org/manifests"
	URL string `json:"url"`
	// Tag to follow: a new artifact pushed under it is applied.
	// +optional
	Tag string `json:"tag,omitempty"`
	// SemVer is a semantic version range (such as ">=1.0.0 <2.0.0"): the
	// highest tag in the range is applied, and a higher one pushed later
	// is followed.
	// +optional
	SemVer string `json:"semver,omitempty"`
	// Digest pins one artifact (sha256:<64 hex>): it never moves.
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	// +optional
	Digest string `json:"digest,omitempty"`
	// SecretRef names a Secret in the Sync's namespace with the registry
	// credentials: a docker-registry Secret (.dockerconfigjson), or the
	// keys "username" and "password". It is read as the Sync.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Insecure talks plain HTTP to the registry.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// Verify, when set, refuses any artifact that is not signed by a
	// trusted cosign key: nothing of it is rendered or applied, and the
	// Sync is Stalled with reason VerificationFailed.
	// +optional
	Verify *OCIVerification `json:"verify,omitempty"`
}

// OCIVerificationProvider names the signature scheme of an OCI artifact.
// +kubebuilder:validation:Enum=cosign
type OCIVerificationProvider string

// VerifyCosign checks cosign signatures made with a key pair.
const VerifyCosign OCIVerificationProvider = "cosign"

// OCIVerification says who must have signed an OCI artifact: the holder
// of a trusted cosign key (secretRef), or, keyless, an OIDC identity
// (matchOIDCIdentity) certified by a certificate authority of a Sigstore
// trusted root (trustedRootSecretRef).
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) != has(self.matchOIDCIdentity)",message="set secretRef (cosign public keys) or matchOIDCIdentity (keyless signatures), exactly one"
// +kubebuilder:validation:XValidation:rule="has(self.matchOIDCIdentity) == has(self.trustedRootSecretRef)",message="matchOIDCIdentity and trustedRootSecretRef go together: keyless signatures are checked against the certificate authorities of the trusted root"
type OCIVerification struct {
	// Provider is the signature scheme: cosign.
	// +kubebuilder:default=cosign
	// +optional
	Provider OCIVerificationProvider `json:"provider,omitempty"`
	// SecretRef names a Secret in the Sync's namespace holding the
	// trusted cosign public keys, one PEM public key per "*.pub" entry
	// (as `cosign generate-key-pair` writes cosign.pub).
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// MatchOIDCIdentity lists the identities allowed to sign keyless
	// (with a certificate from Fulcio, `cosign sign` without --key): a
	// signature counts when its certificate names the issuer and a
	// subject of one entry.
	// +kubebuilder:validation:MinItems=1
	// +optional
	MatchOIDCIdentity []OIDCIdentityMatch `json:"matchOIDCIdentity,omitempty"`
	// TrustedRootSecretRef names a Secret in the Sync's namespace whose
	// trusted_root.json entry is a Sigstore trusted root (as `cosign
	// trusted-root create` writes it): the certificate authorities that
	// keyless signatures' certificates must come from.
	// +optional
	TrustedRootSecretRef *LocalObjectReference `json:"trustedRootSecretRef,omitempty"`
}

// OIDCIdentityMatch is an identity allowed to sign keyless: Go regular
// expressions, each matching the whole value.
type OIDCIdentityMatch struct {
	// Issuer matches the OIDC issuer in the certificate, such as
	// https://token\.actions\.githubusercontent\.com.
	// +kubebuilder:validation:MinLength=1
	Issuer string `json:"issuer"`
	// Subject matches a subject of the certificate: an email address or
	// a URI (a workflow of a GitHub repository, such as
	// https://github\.com/org/fleet/\.github/workflows/release\.yaml@refs/tags/v.*).
	// +kubebuilder:validation:MinLength=1
	Subject string `json:"subject"`
}

// Origin is where the files of s come from and what of it is followed,
// as views name them: for git, the URL and "branch main", "tag v1.2.0"
// or "commit <sha>"; for OCI, the oci:// URL and "tag 1.2.0" (or "tag
// latest" when none is set), "semver >=1.0.0" or "digest sha256:…".
func (s Source) Origin() (url, ref string) {
	if s.Kind() == SourceOCI {
		o := s.OCI
		switch {
		case o.Digest != "":
			return o.URL, "digest " + o.Digest
		case o.SemVer != "":
			return o.URL, "semver " + o.SemVer
		case o.Tag != "":
			return o.URL, "tag " + o.Tag
		}
		return o.URL, "tag latest"
	}
	switch g := s.Git; {
	case g.Commit != "":
		return g.URL, "commit " + g.Commit
	case g.Tag != "":
		return g.URL, "tag " + g.Tag
	}
	return s.Git.URL, "branch " + s.Git.Branch
}
