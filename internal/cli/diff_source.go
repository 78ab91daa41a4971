package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
)

var fullSHAPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// resolveRef resolves ref in req's repository as a branch, else a tag,
// else, if it is one, a full commit SHA. It returns req with the ref set
// and the revision. flag names the flag ref came from, for errors.
func resolveRef(ctx context.Context, req source.Request, flag, ref string) (source.Request, string, error) {
	if req.Kind() == v1alpha1.SourceOCI {
		return resolveArtifact(ctx, req, flag, ref)
	}
	var errs []error
	for _, r := range []source.Ref{{Branch: ref}, {Tag: ref}} {
		req.Ref = r
		rev, err := source.Resolve(ctx, req)
		if err == nil {
			return req, rev, nil
		}
		errs = append(errs, err)
	}
	if fullSHAPattern.MatchString(ref) {
		req.Ref = source.Ref{Commit: ref}
		return req, ref, nil
	}
	return req, "", fmt.Errorf("%s %q is not a branch or tag of %s, nor a full commit SHA: %w", flag, ref, source.Redact(req.URL), errors.Join(errs...))
}

// resolveArtifact resolves ref in the repository of req, an OCI source,
// as a digest (sha256:<hex>) or else a tag, in place of the Sync's tag,
// semver range or digest.
func resolveArtifact(ctx context.Context, req source.Request, flag, ref string) (source.Request, string, error) {
	o := *req.OCI
	o.Tag, o.SemVer, o.Digest = ref, "", ""
	if strings.HasPrefix(ref, "sha256:") {
		o.Tag, o.Digest = "", ref
	}
	req.OCI = &o
	rev, err := source.Resolve(ctx, req)
	if err != nil {
		return req, "", fmt.Errorf("%s %q is not a tag or digest of %s: %w", flag, ref, o.URL, err)
	}
	return req, rev, nil
}
