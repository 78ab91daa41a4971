// Package charts fetches Helm charts from HTTP Helm repositories
// (index.yaml) and OCI registries into a local cache, so that rendering
// reads a chart from disk and only the source layer touches the network.
//
// A Ref names a chart and a version or semver range; Fetcher.Fetch picks
// the highest version the range allows, downloads it, verifies it against
// its digest (the index's sha256, or the OCI layer digest) and keeps it in
// the cache under that digest, so a chart already cached is not
// downloaded again. A new version that matches the range is picked up by
// the next Fetch; retries and back-off are the caller's.
//
// It does not render charts, check provenance (.prov) signatures or
// follow OCI referrers. Errors never contain credentials; their kinds are
// told apart with errors.Is (ErrUnreachable, ErrUnauthorized,
// ErrChartNotFound, ErrNoMatchingVersion, ErrDigestMismatch, ErrTooLarge,
// ErrInvalidRef, ErrInvalidResponse), all of which a caller reports as a
// failed fetch of that chart.
package charts
