package cli

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Kubernetes version comes from the module build info, which only a
// real binary carries, so this test builds one.
func TestVersionNamesTheKubernetesAPIItWasBuiltAgainst(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "driftless")
	build := exec.Command("go", "build", "-o", bin, "github.com/driftless/driftless/cmd/driftless")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
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
	if bi.Version == "" || bi.Commit == "" {
		t.Errorf("version %q / commit %q must not be empty", bi.Version, bi.Commit)
	}
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
