package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

// `make build` stamps the version and commit into the binary with the
// Makefile's LDFLAGS. This test builds a binary with those very flags (read
// from the Makefile, with known values for $(VERSION) and $(COMMIT)) and
// checks that `driftless version` reports them, so that a renamed variable
// or package, which -X ignores silently, fails here. The Kubernetes version
// comes from the module build info, which only a real binary carries.
func TestVersionReportsWhatTheMakefileStampsAndTheKubernetesAPI(t *testing.T) {
	const wantVersion, wantCommit = "v0.0.0-test.1", "0123abc"
	ldflags := makefileLDFlags(t, map[string]string{"$(VERSION)": wantVersion, "$(COMMIT)": wantCommit})
	bin := filepath.Join(t.TempDir(), "driftless")
	if err := testenv.BuildAgent(bin, "-ldflags", ldflags); err != nil {
		t.Fatalf("-ldflags %q: %v", ldflags, err)
	}
	out, err := exec.Command(bin, "version", "--output", "json").Output()
	if err != nil {
		t.Fatalf("driftless version: %v", err)
	}
	var bi BuildInfo
	if err := json.Unmarshal(out, &bi); err != nil {
		t.Fatalf("version --output json is not JSON: %v\n%s", err, out)
	}
	if !strings.HasPrefix(bi.Kubernetes, "v1.37.") {
		t.Errorf("kubernetes = %q, want v1.37.x (from k8s.io/client-go v0.37.x)", bi.Kubernetes)
	}
	if bi.Version != wantVersion || bi.Commit != wantCommit {
		t.Errorf("version %q, commit %q; want %q and %q, as stamped by the Makefile's LDFLAGS (%s)",
			bi.Version, bi.Commit, wantVersion, wantCommit, ldflags)
	}
}

// makefileLDFlags returns the value of LDFLAGS in the repository's
// Makefile, with each make variable replaced as vars says.
func makefileLDFlags(t *testing.T, vars map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var value []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "LDFLAGS :="); ok {
			in, line = true, rest
		}
		if !in {
			continue
		}
		more := strings.HasSuffix(line, "\\")
		value = append(value, strings.TrimSpace(strings.TrimSuffix(line, "\\")))
		if !more {
			break
		}
	}
	if len(value) == 0 {
		t.Fatal("the Makefile has no `LDFLAGS :=` line; this test reads the flags `make build` links with")
	}
	ldflags := strings.Join(value, " ")
	for k, v := range vars {
		if !strings.Contains(ldflags, k) {
			t.Fatalf("the Makefile's LDFLAGS do not use %s: %s", k, ldflags)
		}
		ldflags = strings.ReplaceAll(ldflags, k, v)
	}
	return ldflags
}

func TestKubernetesVersionFromClientGo(t *testing.T) {
	for in, want := range map[string]string{"v0.37.2": "v1.37.2", "v0.38.0-rc.1": "v1.38.0-rc.1", "(devel)": "(devel)"} {
		if got := kubernetesVersion(in); got != want {
			t.Errorf("kubernetesVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVersionTextOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Execute([]string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d: %s", code, errOut.String())
	}
	for _, want := range []string{"driftless ", "commit:", "kubernetes:", "go:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUnknownOutputFormatIsAnError(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Execute([]string{"version", "-o", "yaml"}, &out, &errOut); code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "use text or json") {
		t.Errorf("error does not say what to do: %q", errOut.String())
	}
}
