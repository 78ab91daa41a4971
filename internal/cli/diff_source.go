package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/driftless/driftless/internal/source"
)

var fullSHAPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// resolveRef resolves ref in req's repository as a branch, else a tag,
// else, if it is one, a full commit SHA. It returns req with the ref set
// and the revision. flag names the flag ref came from, for errors.
func resolveRef(ctx context.Context, req source.Request, flag, ref string) (source.Request, string, error) {
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
