package charts

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/driftless/driftless/internal/source"
)

// Ref names a chart in an HTTP Helm repository or an OCI registry.
// Exactly one of Repository and OCI is set.
type Ref struct {
	// Repository is the URL of an HTTP Helm repository, the directory
	// that holds index.yaml (https://charts.example.com).
	Repository string
	// OCI is the repository of the chart in an OCI registry,
	// oci://registry.example.com/charts/web. When Name is set and is not
	// the last path element, it is appended (oci://host/charts + web).
	OCI string
	// Name is the chart's name: required for Repository, optional for OCI.
	Name string
	// Version is an exact version (1.4.0), a semver range (">=1.2 <2",
	// "1.4.x", "~1.4") or empty for the highest stable version.
	// Prereleases match only a range that names one (">=1.5.0-0").
	Version string
	// Credentials authenticate to the repository or registry.
	Credentials Credentials
	// Insecure talks plain HTTP to an OCI registry. TLS verification is
	// never skipped: give a CA in Credentials instead.
	Insecure bool
	// Hosts, when it restricts, are the only hosts the chart may come
	// from: the repository's or registry's, and the host of the download
	// URL an index lists (--tenant-source-hosts for a tenant's Sync).
	// Anything else fails with ErrHostNotAllowed before any request.
	Hosts source.Hosts
}

// Source is the repository address without the chart: for naming it in
// messages. It never holds credentials.
func (r Ref) Source() string {
	if r.OCI != "" {
		return redactURL(r.OCI)
	}
	return redactURL(r.Repository)
}

// String names the chart and its source, without credentials.
func (r Ref) String() string {
	v := r.Version
	if v == "" {
		v = "latest"
	}
	if r.OCI != "" {
		return fmt.Sprintf("%s@%s", r.Source(), v)
	}
	return fmt.Sprintf("%s/%s@%s", r.Source(), r.Name, v)
}

// Chart is a chart fetched into the cache.
type Chart struct {
	// Path is the chart archive (.tgz) in the cache, named by its digest.
	// It is never rewritten in place: read it while it exists.
	Path string
	// Name and Version are the chart's, as the repository lists them.
	Name, Version string
	// Digest is the archive's sha256, "sha256:<hex>".
	Digest string
}

// Credentials authenticate to a chart repository or registry. They are
// never printed: fmt shows which fields are set, not their values.
type Credentials struct {
	// Username and Password are sent as basic auth.
	Username, Password string
	// Token is sent as a bearer token (HTTP) or registry token (OCI)
	// when there is no Password; with a Username it is the password.
	Token string
	// CA is PEM certificates trusted in addition to the system's.
	CA []byte
}

// Keys of the chart Secret.
const (
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
	SecretKeyToken    = "token"
	SecretKeyCA       = "ca.crt"
)

// CredentialsFromSecret reads Credentials from a Secret's data: the keys
// username, password, token and ca.crt, each optional.
func CredentialsFromSecret(data map[string][]byte) Credentials {
	return Credentials{
		Username: string(data[SecretKeyUsername]),
		Password: string(data[SecretKeyPassword]),
		Token:    string(data[SecretKeyToken]),
		CA:       data[SecretKeyCA],
	}
}

// Format prints which credentials are set, never their values, for every
// verb (%v, %+v, %#v, %s, %q, ...).
func (c Credentials) Format(f fmt.State, _ rune) {
	_, _ = fmt.Fprint(f, c.String())
}

// String names the credentials that are set, not their values.
func (c Credentials) String() string {
	var set []string
	if c.Username != "" {
		set = append(set, "username")
	}
	if c.Password != "" {
		set = append(set, "password")
	}
	if c.Token != "" {
		set = append(set, "token")
	}
	if len(c.CA) > 0 {
		set = append(set, "ca.crt")
	}
	if len(set) == 0 {
		return "Credentials{}"
	}
	return "Credentials{" + strings.Join(set, ", ") + ": set, redacted}"
}

// GoString is String: %#v must not print credentials either.
func (c Credentials) GoString() string { return c.String() }

// secrets are the values to scrub from any text that leaves the package.
func (c Credentials) secrets() []string {
	var s []string
	for _, v := range []string{c.Password, c.Token} {
		if len(v) >= 4 {
			s = append(s, v)
		}
	}
	return s
}

// redactURL drops the userinfo of a URL; an unparsable one is replaced.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	return u.String()
}

// check reports what is wrong with the Ref before any network access.
func (r Ref) check() error {
	switch {
	case r.Repository != "" && r.OCI != "":
		return invalidRef("both a repository and an oci address are set: set one of spec.chart.repository and spec.chart.oci")
	case r.Repository == "" && r.OCI == "":
		return invalidRef("neither a repository nor an oci address is set: set spec.chart.repository or spec.chart.oci")
	case r.Repository != "":
		u, err := url.Parse(r.Repository)
		if err != nil {
			return invalidRef("spec.chart.repository is not a valid URL: write https://<host>/<path>")
		}
		if u.User != nil {
			return invalidRef(fmt.Sprintf("spec.chart.repository %s holds credentials in its URL: remove them and put them in a Secret named by spec.chart.secretRef", redactURL(r.Repository)))
		}
		if u.Scheme != "https" && u.Scheme != "http" {
			return invalidRef(fmt.Sprintf("spec.chart.repository %s is not an http:// or https:// URL (for a registry use spec.chart.oci: oci://...)", redactURL(r.Repository)))
		}
		if u.Host == "" {
			return invalidRef(fmt.Sprintf("spec.chart.repository %s has no host", redactURL(r.Repository)))
		}
		if r.Name == "" {
			return invalidRef(fmt.Sprintf("no chart name for repository %s: set spec.chart.name", u.Host))
		}
	case r.OCI != "":
		if !strings.HasPrefix(r.OCI, "oci://") {
			return invalidRef("spec.chart.oci must begin with oci:// (oci://<registry>/<path>/<chart>)")
		}
		if strings.Contains(strings.TrimPrefix(r.OCI, "oci://"), "@") {
			return invalidRef("spec.chart.oci must not hold credentials or a digest: put credentials in a Secret named by spec.chart.secretRef and the version in spec.chart.version")
		}
	}
	if r.Name != "" && (strings.ContainsAny(r.Name, "/\\") || r.Name == "." || r.Name == "..") {
		return invalidRef(fmt.Sprintf("chart name %q is not a valid name", r.Name))
	}
	return nil
}

func invalidRef(msg string) error { return errors.New(msg) }
