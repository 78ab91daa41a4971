// Package origin owns the driftless.dev/origin annotation: where in git an
// object came from (Origin), written by Format and read back by Parse. It
// is small so that readers of the annotation (the admission webhook, the
// CLI) need not link the renderer.
package origin

import (
	"fmt"
	"strconv"
	"strings"
)

// Origin says where in git an object came from.
type Origin struct {
	Path string // slash-separated path relative to the checkout root, e.g. "workloads/app.yaml"
	Doc  int    // 0-based index of the YAML document within the file
	Line int    // 1-based line where that document starts in the file
	// From is set for an object that a kustomization built: Path is the
	// kustomization file and From the file the object came from, such as
	// a resource of a base, or the kustomization whose generator made it.
	// Doc and Line are then 0.
	From string
}

// String reads "workloads/app.yaml#0", the path and the document index,
// or for an object a kustomization built "apps/prod/kustomization.yaml →
// apps/base/deployment.yaml", the kustomization and the file the object
// came from; only the kustomization when that is the file.
func (o Origin) String() string {
	switch o.From {
	case "":
		return o.Path + "#" + strconv.Itoa(o.Doc)
	case o.Path:
		return o.Path
	}
	return o.Path + " → " + o.From
}

// Format is the value of the driftless.dev/origin annotation of an
// object from o at revision: o.String(), then "@" and the short revision
// when there is one.
func Format(o Origin, revision string) string {
	s := o.String()
	if rev := revision[:min(7, len(revision))]; rev != "" {
		s += "@" + rev
	}
	return s
}

// Parse reads a driftless.dev/origin annotation that Format
// wrote: the Origin (without Line, which the annotation does not hold)
// and the short revision, "" when the annotation names none.
func Parse(s string) (Origin, string, error) {
	if s == "" {
		return Origin{}, "", fmt.Errorf("empty origin annotation")
	}
	var rev string
	if i := strings.LastIndex(s, "@"); i >= 0 && isHex(s[i+1:]) {
		s, rev = s[:i], s[i+1:]
	}
	if path, from, ok := strings.Cut(s, " → "); ok {
		if path == "" || from == "" {
			return Origin{}, "", fmt.Errorf("origin %q is not <kustomization> → <file>", s)
		}
		return Origin{Path: path, From: from}, rev, nil
	}
	if i := strings.LastIndex(s, "#"); i > 0 {
		if doc, err := strconv.Atoi(s[i+1:]); err == nil && doc >= 0 {
			return Origin{Path: s[:i], Doc: doc}, rev, nil
		}
	}
	// A kustomization that is itself the file the object came from.
	return Origin{Path: s, From: s}, rev, nil
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
