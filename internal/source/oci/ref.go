package oci

import (
	"crypto"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// Media types and annotations of a Flux artifact.
const (
	ConfigMediaType  = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"

	SourceAnnotation   = "org.opencontainers.image.source"
	RevisionAnnotation = "org.opencontainers.image.revision"
	CreatedAnnotation  = "org.opencontainers.image.created"
)

// DefaultTag is the tag followed when a Request names none.
const DefaultTag = "latest"

// Request is an artifact to follow and how to read it.
type Request struct {
	// URL is the repository: oci://<host>/<path>.
	URL string
	// At most one of Tag, SemVer and Digest; none follows DefaultTag.
	Tag, SemVer, Digest string
	// Insecure talks plain HTTP to the registry.
	Insecure bool
	// Auth authenticates to the registry; nil is anonymous.
	Auth authn.Authenticator
	// Keys, when not empty, are the cosign public keys one of which must
	// have signed the artifact; KeysSecret names where they came from.
	Keys       []PublicKey
	KeysSecret string
	// Root, when set, makes the artifact need a keyless cosign signature
	// instead: by a certificate that a certificate authority of Root
	// issued to one of Identities. RootSecret names where Root came
	// from.
	Root       *TrustedRoot
	Identities []Identity
	RootSecret string
}

// verifies says whether the artifact must carry a trusted signature.
func (r Request) verifies() bool { return len(r.Keys) > 0 || r.Root != nil }

// PublicKey is a trusted cosign public key and the Secret entry it was
// read from.
type PublicKey struct {
	Name string
	Key  crypto.PublicKey
}

// Key is a string that identifies the request's artifact stream (not its
// credentials): requests with equal keys resolve alike.
func (r Request) Key() string {
	return strings.Join([]string{r.URL, r.Tag, r.SemVer, r.Digest, fmt.Sprint(r.Insecure)}, "\x00")
}

// Repository parses the URL.
func (r Request) Repository() (name.Repository, error) {
	return ParseRepository(r.URL, r.Insecure)
}

// ParseRepository parses oci://<host>/<path>; insecure allows plain HTTP.
func ParseRepository(url string, insecure bool) (name.Repository, error) {
	path, ok := strings.CutPrefix(url, "oci://")
	if !ok || !strings.Contains(path, "/") {
		return name.Repository{}, fmt.Errorf("%s is not an OCI repository URL: write oci://<registry host>/<repository>", url)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(strings.TrimSuffix(path, "/"), opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("%s is not an OCI repository URL: write oci://<registry host>/<repository> in lower case", url)
	}
	return repo, nil
}

// Revision is how a resolved artifact is shown, as Flux shows it:
// "<tag>@sha256:<hex>", or the digest alone for a pinned digest.
func Revision(tag, digest string) string {
	if tag == "" {
		return digest
	}
	return tag + "@" + digest
}

// DigestOf is the digest of a revision made by Revision.
func DigestOf(revision string) (string, error) {
	d := revision
	if i := strings.LastIndexByte(revision, '@'); i >= 0 {
		d = revision[i+1:]
	}
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", fmt.Errorf("revision %q has no sha256 digest", revision)
	}
	return d, nil
}

// Short is a revision shortened for messages: the tag and 12 hex digits.
func Short(revision string) string {
	tag, d, ok := strings.Cut(revision, "@")
	if !ok {
		tag, d = "", revision
	}
	if hex, ok := strings.CutPrefix(d, "sha256:"); ok && len(hex) > 12 {
		d = "sha256:" + hex[:12]
	}
	if tag == "" {
		return d
	}
	return tag + "@" + d
}

// errNoMatch is wrapped by PickSemver's error when no tag is in range.
var errNoMatch = errors.New("no tag matches")

// PickSemver returns the highest tag of tags that is a semantic version
// in the range want (a leading "v" is allowed); tags that are not
// versions are ignored. Its error names the range and some tags seen.
func PickSemver(tags []string, want string) (string, error) {
	c, err := semver.NewConstraint(want)
	if err != nil {
		return "", fmt.Errorf("semver %q is not a version range: %v", want, err)
	}
	var best *semver.Version
	var bestTag string
	var versions []string
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil {
			continue
		}
		versions = append(versions, t)
		if c.Check(v) && (best == nil || v.GreaterThan(best) || (v.Equal(best) && t < bestTag)) {
			best, bestTag = v, t
		}
	}
	if best == nil {
		sort.Strings(versions)
		if len(versions) > 10 {
			versions = append(versions[len(versions)-10:], "…")
		}
		seen := "none"
		if len(versions) > 0 {
			seen = strings.Join(versions, ", ")
		}
		return "", fmt.Errorf("%w semver %q (version tags: %s)", errNoMatch, want, seen)
	}
	return bestTag, nil
}

// Reference is the artifact of revision (as Resolve returns it) in the
// repository at url, as one address: oci://<host>/<path>:<tag>@sha256:<hex>,
// or oci://<host>/<path>@sha256:<hex> for a pinned digest.
func Reference(url, revision string) string {
	if revision == "" {
		return url
	}
	if strings.Contains(revision, "@") {
		return url + ":" + revision
	}
	return url + "@" + revision
}
