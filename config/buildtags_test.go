package config_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// Kustomize's Go plugin loader imports "plugin", and a cgo build that
// links "plugin" keeps every method and exports every symbol: a binary of
// 175 MB instead of 132, about 19 MiB more of it resident in the agent.
// driftless runs no Kustomize plugins, so `make build` and the image
// build leave the loader out with Kustomize's build tag.
func TestTheBuildsLeaveOutKustomizesGoPluginLoader(t *testing.T) {
	// The tests build the agent with testenv.BuildAgent, as make build does.
	const tag = testenv.AgentBuildTags
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	makeTags := regexp.MustCompile(`(?m)^TAGS := (.*)$`).FindSubmatch(makefile)
	build := regexp.MustCompile(`(?m)^\t\$\(STATIC\) \$\(GO\) build (.*) ./cmd/driftless$`).FindSubmatch(makefile)
	switch {
	case makeTags == nil || !slices.Contains(strings.Split(string(makeTags[1]), ","), tag):
		t.Errorf("the Makefile sets no TAGS := ...%s...", tag)
	case build == nil || !strings.Contains(string(build[1]), "-tags $(TAGS)"):
		t.Errorf("make build does not build cmd/driftless static with -tags $(TAGS): $(STATIC) $(GO) build -tags $(TAGS) ...")
	case !regexp.MustCompile(`(?m)^STATIC := CGO_ENABLED=0$`).Match(makefile):
		// testenv.BuildAgent builds static: so must make build, or each
		// compiles the agent's packages apart.
		t.Errorf("the Makefile lacks STATIC := CGO_ENABLED=0")
	}
	if !regexp.MustCompile(`go build [^\n]*-tags [^\n]*` + tag).Match(dockerfile) {
		t.Errorf("the Dockerfile's go build lacks -tags %s", tag)
	}

	// With the tag, nothing the binary links imports "plugin".
	for _, tags := range []string{"", tag} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", "../cmd/driftless").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps: %v\n%s", err, out)
		}
		linked := slices.Contains(strings.Fields(string(out)), "plugin")
		if linked != (tags == "") {
			t.Errorf("go list -tags %q -deps ./cmd/driftless: links \"plugin\" = %t", tags, linked)
		}
	}
}
