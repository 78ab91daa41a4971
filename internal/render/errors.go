package render

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownKind is wrapped by errors about kinds the cluster does not serve.
// ScopeResolver implementations wrap it too.
var ErrUnknownKind = errors.New("unknown kind")

// Error is one problem with the files in git that the user has to fix.
//
// Origin is zero when the problem is with an Options.Paths entry, and
// Origin.Line is 0 when it is with a whole file rather than one document.
// Object is "Kind/namespace/name" as far as it is known, or "".
type Error struct {
	Origin Origin
	Object string
	Err    error
}

// Error reads "workloads/app.yaml:7 (document 1): Deployment/web: <err>",
// or for an object a kustomization built "apps/prod/kustomization.yaml →
// apps/base/web.yaml: Deployment/web: <err>", leaving out the parts that
// are not known.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Origin.Path == "":
	case e.Origin.From != "":
		b.WriteString(e.Origin.String() + ": ")
	case e.Origin.Line > 0:
		fmt.Fprintf(&b, "%s:%d (document %d): ", e.Origin.Path, e.Origin.Line, e.Origin.Doc)
	default:
		b.WriteString(e.Origin.Path + ": ")
	}
	if e.Object != "" {
		b.WriteString(e.Object + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errors returns every *Error in err, looking through errors.Join and %w
// wrapping. It returns nil for errors that are not about the files in git,
// such as a checkout directory that cannot be opened.
func Errors(err error) []*Error {
	switch err := err.(type) {
	case *Error:
		return []*Error{err}
	case interface{ Unwrap() []error }:
		var all []*Error
		for _, err := range err.Unwrap() {
			all = append(all, Errors(err)...)
		}
		return all
	case interface{ Unwrap() error }:
		return Errors(err.Unwrap())
	}
	return nil
}
