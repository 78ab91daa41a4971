package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// AgentBuildTags are the build tags of `make build` and of the image's
// binary: Kustomize's Go plugin loader left out (driftless runs no
// Kustomize plugins; its import of "plugin" makes a cgo build link every
// method and export every symbol).
const AgentBuildTags = "kustomize_disable_go_plugin_support"

// BuildAgent builds cmd/driftless into bin as `make build` and the image
// build do: static (CGO_ENABLED=0) with AgentBuildTags; extra are more
// flags of go build (-ldflags, which change only the link). Every test and
// the bench build the agent this way, and the Makefile builds and vets
// with CGO_ENABLED=0 too, so one compile of the agent's packages serves
// them all: a cgo build and a static one share no compiled package, and a
// second compile of the agent's dependencies costs about 4 minutes of a
// cold two-core machine (7 minutes of CPU).
func BuildAgent(bin string, extra ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := append([]string{"build", "-tags", AgentBuildTags}, extra...)
	cmd := exec.Command("go", append(args, "-o", bin, "./cmd/driftless")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("CGO_ENABLED=0 go build -tags %s ./cmd/driftless: %w\n%s", AgentBuildTags, err, out)
	}
	return nil
}

// BuildDriftless builds cmd/driftless of the checkout into dir and returns
// the binary's path (dir/driftless), as BuildAgent builds it.
func BuildDriftless(dir string) (string, error) {
	bin := filepath.Join(dir, "driftless")
	if err := BuildAgent(bin); err != nil {
		return "", err
	}
	return bin, nil
}
