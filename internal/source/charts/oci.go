package charts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of a Helm chart in an OCI registry.
const (
	HelmConfigMediaType       types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	HelmChartLayerMediaType   types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	legacyChartLayerMediaType types.MediaType = "application/tar+gzip"
)

func (f *Fetcher) fetchOCI(ctx context.Context, ref Ref, dir scope) (Chart, error) {
	repo, err := ociRepository(ref)
	if err != nil {
		return Chart{}, err
	}
	rt, err := f.roundTripper(ref)
	if err != nil {
		return Chart{}, err
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(rt),
		remote.WithAuth(ociAuth(ref.Credentials)),
		remote.WithUserAgent(userAgent),
		// One attempt: the caller retries with its own back-off.
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithRetryStatusCodes(),
	}
	name := chartName(ref)

	version := ref.Version
	if !exactVersion(version) {
		tags, err := remote.List(repo, opts...)
		if err != nil {
			return Chart{}, ociError(ref, err, "the tags of "+name)
		}
		versions := make([]string, len(tags))
		for i, t := range tags {
			versions[i] = strings.ReplaceAll(t, "_", "+") // Helm writes "+" as "_" in tags
		}
		picked, available, _ := pickVersion(versions, ref.Version)
		if picked == "" {
			return Chart{}, noMatch(ref, available)
		}
		version = picked
	}
	tag := repo.Tag(strings.ReplaceAll(version, "+", "_"))
	what := fmt.Sprintf("chart %s %s", name, version)

	img, err := remote.Image(tag, opts...)
	if err != nil {
		return Chart{}, ociError(ref, err, what)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return Chart{}, ociError(ref, err, what)
	}
	if manifest.Config.MediaType != HelmConfigMediaType {
		return Chart{}, failure(ErrInvalidResponse, ref, fmt.Sprintf("%s in %s is not a Helm chart: its config has media type %q, not %q",
			what, ref.Source(), manifest.Config.MediaType, HelmConfigMediaType), nil)
	}
	var layer *v1.Descriptor
	for i, l := range manifest.Layers {
		if l.MediaType == HelmChartLayerMediaType || l.MediaType == legacyChartLayerMediaType {
			layer = &manifest.Layers[i]
			break
		}
	}
	if layer == nil {
		return Chart{}, failure(ErrInvalidResponse, ref, fmt.Sprintf("%s in %s has no layer of media type %q", what, ref.Source(), HelmChartLayerMediaType), nil)
	}
	if layer.Digest.Algorithm != "sha256" {
		return Chart{}, failure(ErrInvalidResponse, ref, fmt.Sprintf("%s in %s has a %s layer digest; only sha256 is supported", what, ref.Source(), layer.Digest.Algorithm), nil)
	}
	want := layer.Digest.Hex
	chart := Chart{Path: dir.path(want), Name: name, Version: version, Digest: layer.Digest.String()}
	if dir.cached(want) {
		return chart, nil
	}
	limit := f.maxChart()
	if layer.Size > limit {
		return Chart{}, tooLarge(ref, what, limit)
	}
	l, err := img.LayerByDigest(layer.Digest)
	if err != nil {
		return Chart{}, ociError(ref, err, what)
	}
	rc, err := l.Compressed()
	if err != nil {
		return Chart{}, ociError(ref, err, what)
	}
	defer rc.Close()
	got, n, err := dir.store(rc, limit, want)
	switch {
	case errors.Is(err, errTooLarge):
		return Chart{}, tooLarge(ref, what, limit)
	case errors.Is(err, errDigestMismatch),
		// go-containerregistry verifies too, and fails at the last byte.
		err != nil && n == layer.Size && got != want:
		return Chart{}, mismatch(ref, name, version, want, got)
	case err != nil:
		return Chart{}, ociError(ref, err, what)
	}
	f.downloads.Add(1)
	return chart, nil
}

// ociRepository parses ref.OCI (with ref.Name appended when it is not
// already the last element).
func ociRepository(ref Ref) (name.Repository, error) {
	path := strings.TrimSuffix(strings.TrimPrefix(ref.OCI, "oci://"), "/")
	if ref.Name != "" && path[strings.LastIndex(path, "/")+1:] != ref.Name {
		path += "/" + ref.Name
	}
	var opts []name.Option
	if ref.Insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(path, opts...)
	if err != nil {
		return name.Repository{}, failure(ErrInvalidRef, ref, fmt.Sprintf("spec.chart.oci %s is not a valid registry repository: write oci://<registry>/<path>/<chart>", ref.Source()), nil)
	}
	return repo, nil
}

// ociAuth is the registry authenticator for the credentials.
func ociAuth(c Credentials) authn.Authenticator {
	switch {
	case c.Username != "" && c.Password == "" && c.Token != "":
		return &authn.Basic{Username: c.Username, Password: c.Token}
	case c.Username != "" || c.Password != "":
		return &authn.Basic{Username: c.Username, Password: c.Password}
	case c.Token != "":
		return &authn.Bearer{Token: c.Token}
	}
	return authn.Anonymous
}

// ociError words a registry failure by its status, not by the
// registry's own text (which can quote the request).
func ociError(ref Ref, err error, what string) error {
	var te *transport.Error
	if errors.As(err, &te) {
		status := fmt.Sprintf("%d %s", te.StatusCode, http.StatusText(te.StatusCode))
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return failure(ErrUnauthorized, ref, fmt.Sprintf("%s refused %s (%s): check the credentials in the Secret named by spec.chart.secretRef (keys %s and %s, or %s)",
				ref.Source(), what, status, SecretKeyUsername, SecretKeyPassword, SecretKeyToken), nil)
		case te.StatusCode == http.StatusNotFound:
			return failure(ErrChartNotFound, ref, fmt.Sprintf("%s has no %s (%s): check spec.chart.oci and spec.chart.version", ref.Source(), what, status), nil)
		case te.StatusCode >= 500 || te.StatusCode == http.StatusTooManyRequests:
			return failure(ErrUnreachable, ref, fmt.Sprintf("%s answered %s for %s: try again later", ref.Source(), status, what), nil)
		}
		return failure(ErrInvalidResponse, ref, fmt.Sprintf("%s answered %s for %s", ref.Source(), status, what), nil)
	}
	if isNetwork(err) {
		return unreachable(ref, err)
	}
	return failure(ErrInvalidResponse, ref, fmt.Sprintf("%s: reading %s failed: %v", ref.Source(), what, scrubErr(err, ref.Credentials)), nil)
}
