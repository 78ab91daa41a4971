package secrets_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// SOPS's store packages take the config structs of sops/v3/config, which
// imports sops/v3/publish: Google Cloud Storage with gRPC's xDS, Envoy's
// API and OpenTelemetry's SDK, S3, Vault's API. Nothing driftless does
// calls them, yet linked they cost every agent process about 10 MiB of
// RSS and the image 14 MB (docs/performance.md, "Round 5: SOPS's files
// without its config package"). driftless reads and writes SOPS files with
// stores of its own; this keeps it so.
func TestTheAgentLinksNeitherSOPSConfigNorPublish(t *testing.T) {
	// The image's build tags (Dockerfile, Makefile's TAGS).
	out, err := exec.Command("go", "list", "-tags", "kustomize_disable_go_plugin_support", "-deps", "../../cmd/driftless").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, pkg := range []string{"github.com/getsops/sops/v3/config", "github.com/getsops/sops/v3/publish"} {
		if slices.Contains(deps, pkg) {
			t.Errorf("./cmd/driftless links %s; read SOPS files with internal/secrets's stores, not SOPS's", pkg)
		}
	}
}
