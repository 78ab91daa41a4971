package render

import (
	"errors"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/driftless/driftless/api/v1alpha1"
)

// ErrFetchFailed is wrapped by the errors of a HelmChart whose chart or
// values could not be fetched: a chart repository or registry that did
// not answer, or a ConfigMap or Secret of valuesFrom that could not be
// read. The files in git may be fine; trying again may succeed. The
// engine reports such a render as FetchFailed, not BuildFailed.
var ErrFetchFailed = errors.New("fetch failed")

// ErrValuesNotFound is wrapped by the error of a ValuesReader when the
// ConfigMap or Secret, or its key, does not exist: an optional valuesFrom
// entry is then skipped.
var ErrValuesNotFound = errors.New("not found")

// ValuesReader reads the values a HelmChart's valuesFrom entry names: the
// data under key of the ConfigMap or Secret (kind) name in the Sync's
// namespace. Its error wraps ErrValuesNotFound when the object or the key
// does not exist. It must never put the data in its error.
type ValuesReader func(kind, name, key string) ([]byte, error)

// LookupFunc answers the lookup function of a HelmChart's templates
// (spec.lookup): the object of apiVersion and kind named name in
// namespace, as a map, or an empty map when it does not exist. Its error
// must say which lookup failed and never quote the object's data.
type LookupFunc func(apiVersion, kind, namespace, name string) (map[string]any, error)

// ChartFetcher fetches the charts of HelmCharts that name an HTTP Helm
// repository (spec.chart.repository, name and version) or an OCI registry
// (spec.chart.oci and version), for render, which talks to no network.
// The engine binds the context of the reconcile.
type ChartFetcher interface {
	// FetchChart returns a local .tgz of the chart req names, verified
	// against its digest, with the version a range resolved to. Render
	// reports its error as a fetch failure of that chart (ErrFetchFailed),
	// so it must say what failed without credentials.
	FetchChart(req ChartRequest) (FetchedChart, error)
}

// ChartRequest is the chart reference of one HelmChart.
type ChartRequest struct {
	// Chart is spec.chart: Repository and Name, or OCI; Version, a version
	// or a semver range; SecretRef, a Secret in the Sync's namespace.
	Chart v1alpha1.ChartReference
	// HelmChart is the file of the HelmChart in the repository, such as
	// "apps/web/helmchart.yaml", for messages.
	HelmChart string
}

// FetchedChart is a chart a ChartFetcher fetched.
type FetchedChart struct {
	// Path is a local chart archive (.tgz), outside the checkout.
	Path string
	// Version is the chart version the request resolved to, such as "1.4.2".
	Version string
	// Digest is the archive's digest, such as "sha256:…".
	Digest string
}

// fallbackKubeVersion is DefaultKubeVersion when the build records no
// client-go version.
const fallbackKubeVersion = "v1.37.0"

// DefaultKubeVersion is .Capabilities.KubeVersion of a render without a
// cluster, Options.KubeVersion empty: the Kubernetes minor version of the
// client-go driftless is built with, such as "v1.37.0".
func DefaultKubeVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fallbackKubeVersion
	}
	for _, m := range info.Deps {
		if m.Path != "k8s.io/client-go" {
			continue
		}
		v, err := semver.NewVersion(strings.TrimPrefix(m.Version, "v"))
		if err != nil || v.Major() != 0 {
			return fallbackKubeVersion
		}
		return "v1." + strconv.FormatUint(v.Minor(), 10) + ".0"
	}
	return fallbackKubeVersion
}
