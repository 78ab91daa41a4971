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
	eachProductFile(t, []string{"internal", "cmd", "bench", "config", "api"}, func(rel, data string) {
		for _, m := range newScheme.FindAllStringSubmatch(data, -1) {
			if m[1] != "v1alpha1" && rel != "api/v1alpha1/scheme.go" {
				t.Errorf("%s builds a scheme of its own (%s): take v1alpha1.NewScheme()", rel, m[0])
			}
		}
	})
}

// eachProductFile calls f with the path (relative to the module's root,
// with slashes) and content of every .go file under dirs that is no
// test.
func eachProductFile(t *testing.T, dirs []string, f func(rel, data string)) {
	t.Helper()
	root := filepath.Join("..", "..")
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			f(filepath.ToSlash(rel), string(data))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
