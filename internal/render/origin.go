package render

import (
	"fmt"
	"strconv"
	"strings"
)

// FormatOrigin is the value of the driftless.dev/origin annotation of an
// object from o at revision: o.String(), then "@" and the short revision
// when there is one.
func FormatOrigin(o Origin, revision string) string {
	s := o.String()
	if rev := revision[:min(7, len(revision))]; rev != "" {
		s += "@" + rev
	}
	return s
}

// ParseOrigin reads a driftless.dev/origin annotation that FormatOrigin
// wrote: the Origin (without Line, which the annotation does not hold)
// and the short revision, "" when the annotation names none.
func ParseOrigin(s string) (Origin, string, error) {
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
