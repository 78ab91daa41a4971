package v1alpha1_test

import (
	"io/fs"
	"os"
	"path/filepath"
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
	root := filepath.Join("..", "..")
	for _, dir := range []string{"internal", "cmd", "api"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.HasPrefix(d.Name(), "zz_generated") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if choosers[filepath.ToSlash(rel)] {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(data), "\n") {
				if m := fieldTest.FindString(line); m != "" {
					t.Errorf("%s:%d chooses the source's kind by its field (%s): switch on Source.Kind() or source.Request.Kind()", rel, i+1, m)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
