package v1alpha1_test

import (
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestTheKindOfASourceIsChosenInOnePlace keeps one answer to "is this
// Sync's source git or OCI?": Source.Kind on the API type and, for a
// fetch request, source.Request.Kind. Everything else switches on the
// kind, so that a third kind is added in the API and the package that
// fetches it, not in every file that tests spec.source.oci.
func TestTheKindOfASourceIsChosenInOnePlace(t *testing.T) {
	fieldTest := regexp.MustCompile(`\b(OCI|Git)\s*[!=]=\s*nil|\.OCI;\s*\w+\s*[!=]=\s*nil`)
	choosers := map[string]bool{"api/v1alpha1/source_kind.go": true, "internal/source/kind.go": true}
	eachProductFile(t, []string{"internal", "cmd", "api"}, func(rel, data string) {
		if choosers[rel] || strings.HasPrefix(path.Base(rel), "zz_generated") {
			return
		}
		for i, line := range strings.Split(data, "\n") {
			if m := fieldTest.FindString(line); m != "" {
				t.Errorf("%s:%d chooses the source's kind by its field (%s): switch on Source.Kind() or source.Request.Kind()", rel, i+1, m)
			}
		}
	})
}
