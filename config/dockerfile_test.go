package config_test

import (
	"debug/elf"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// The image the Deployment runs: its Dockerfile builds a static binary
// with the project's Go and runs it as non-root on distroless/static. CI
// cannot pull images, so the test builds the binary the way the
// Dockerfile does and checks that it is static.
func TestDockerfileBuildsAStaticBinaryRunAsNonRoot(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(raw)
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	// The builder's Go is of the go.mod's release (1.26.x).
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	for _, want := range []string{
		"FROM golang:" + goVersion[1] + ".",
		"CGO_ENABLED=0",
		"./cmd/driftless",
		"FROM gcr.io/distroless/static:nonroot",
		"USER nonroot",
	} {
		if !strings.Contains(dockerfile, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}

	// The build every test and `make build` make (CGO_ENABLED=0, the
	// Dockerfile's tags), without the Dockerfile's -trimpath, which changes
	// nothing about linking but would compile every package again.
	bin := filepath.Join(t.TempDir(), "driftless")
	if err := testenv.BuildAgent(bin); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary is dynamically linked: distroless/static has no loader")
		}
	}
}
