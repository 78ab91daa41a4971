package v1alpha1_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheCodeBuildsItsSchemeInOnePlace keeps one answer to "which kinds
// does driftless's client know?": the agent, the commands, the dashboard,
// the bench and the tests (through testenv.Scheme) all take NewScheme, so
// that a kind added to one is known to all.
func TestTheCodeBuildsItsSchemeInOnePlace(t *testing.T) {
	newScheme := regexp.MustCompile(`\b(\w+)\.NewScheme\(\)`)
	root := filepath.Join("..", "..")
	for _, dir := range []string{"internal", "cmd", "bench", "config", "api"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range newScheme.FindAllStringSubmatch(string(data), -1) {
				if m[1] != "v1alpha1" && filepath.ToSlash(path) != "../../api/v1alpha1/scheme.go" {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s builds a scheme of its own (%s): take v1alpha1.NewScheme()", rel, m[0])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
