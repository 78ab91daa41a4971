package oci

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Resolve asks the registry which artifact req points to and returns its
// revision (see Revision). A pinned digest resolves to itself without a
// request; a semver range lists the tags and takes the highest in range.
func Resolve(ctx context.Context, req Request) (string, error) {
	if req.Digest != "" {
		return req.Digest, nil
	}
	repo, err := req.Repository()
	if err != nil {
		return "", err
	}
	opts := remoteOptions(ctx, req)
	tag := req.Tag
	if req.SemVer != "" {
		tags, err := remote.List(repo, opts...)
		if err != nil {
			return "", registryError(req, "list the tags of", err)
		}
		if tag, err = PickSemver(tags, req.SemVer); err != nil {
			return "", fmt.Errorf("%s: %w: push a matching tag or change spec.source.oci.semver", req.URL, err)
		}
	}
	if tag == "" {
		tag = DefaultTag
	}
	ref := repo.Tag(tag)
	desc, err := remote.Head(ref, opts...)
	if err != nil {
		// Some registries answer no HEAD: GET the manifest instead.
		d, gerr := remote.Get(ref, opts...)
		if gerr != nil {
			return "", registryError(req, "resolve tag "+tag+" of", gerr)
		}
		return Revision(tag, d.Digest.String()), nil
	}
	return Revision(tag, desc.Digest.String()), nil
}

func remoteOptions(ctx context.Context, req Request) []remote.Option {
	auth := req.Auth
	if auth == nil {
		auth = authn.Anonymous
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(auth),
		remote.WithUserAgent("driftless"),
		// One attempt: the Sync retries with its own back-off.
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithRetryStatusCodes(),
	}
}

// registryError words a registry failure by its HTTP status and what to
// do, never quoting the registry's text (which can echo the request).
func registryError(req Request, what string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		status := fmt.Sprintf("%d %s", te.StatusCode, http.StatusText(te.StatusCode))
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s: could not %s the repository (%s): check the credentials in the Secret of spec.source.oci.secretRef", req.URL, what, status)
		case http.StatusNotFound:
			return fmt.Errorf("%s: could not %s the repository (%s): check spec.source.oci.url and the tag or digest", req.URL, what, status)
		}
		return fmt.Errorf("%s: could not %s the repository (%s)", req.URL, what, status)
	}
	return fmt.Errorf("%s: could not %s the repository: %w", req.URL, what, err)
}
