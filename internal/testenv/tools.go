package testenv

import (
	"fmt"
	"os"
	"testing"
)

// CI reports whether the tests run in CI (the environment variable CI is
// "true", as CI systems and .ci/run set it).
func CI() bool { return os.Getenv("CI") == "true" }

// MissingTool ends a test that needs a tool the machine lacks: it fails
// the test under CI=true, where every tool must be installed (.ci/run
// installs them), so that a test cannot vanish from CI unnoticed, and
// skips it elsewhere. format says which tool is missing and how to get it.
func MissingTool(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s (CI=true: a missing tool fails the test)", msg)
	}
	t.Skip(msg)
}
