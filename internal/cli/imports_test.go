package cli

import (
	"go/build"
	"strings"
	"testing"
)

// TestTheCLIImportsNoReconcilerPackage keeps the commands apart from the
// agent's insides: a name both need (a ConfigMap, a label, an annotation)
// lives in api/v1alpha1, so that a command does not import a controller,
// the webhook receiver or the notifications for it. The agent, assembled
// in internal/agent, is the one door from the CLI to them
// (`driftless agent`).
func TestTheCLIImportsNoReconcilerPackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatalf("read the imports of internal/cli: %v", err)
	}
	const internal = "github.com/driftless/driftless/internal/"
	for _, imp := range pkg.Imports {
		for _, banned := range []string{"controller", "receiver", "notify"} {
			if imp == internal+banned || strings.HasPrefix(imp, internal+banned+"/") {
				t.Errorf("internal/cli imports %s: take the name it needs from api/v1alpha1 (move it there), or reach it through internal/agent", imp)
			}
		}
	}
}
