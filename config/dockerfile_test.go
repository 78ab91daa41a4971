package config_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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

	bin := filepath.Join(t.TempDir(), "driftless")
	// Without the Dockerfile's -trimpath and -ldflags, which change
	// nothing about linking but would rebuild every package.
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/driftless")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./cmd/driftless: %v\n%s", err, out)
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
