package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With --admission-warnings, kubectl is refused a Sync whose health check
// expression does not compile or costs too much, naming the field; the
// same Sync with good expressions is created.
func TestAdmissionRefusesASyncWithBadHealthChecks(t *testing.T) {
	ns := env.Namespace(t)
	a := startAdmissionAgent(t, ns, "")
	sync := func(name, failed string) string {
		path := filepath.Join(t.TempDir(), name+".yaml")
		doc := fmt.Sprintf(`apiVersion: driftless.dev/v1alpha1
kind: Sync
metadata: {name: %s, namespace: %s}
spec:
  source: {git: {url: "https://git.example.com/fleet.git", branch: main}}
  suspend: true
  healthChecks:
  - apiVersion: example.com/v1
    kind: Widget
    current: "status.phase == 'Running'"
    failed: %q
`, name, ns, failed)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bad := sync("bad", "status.phase ==")
	a.Eventually("the webhook refuses a Sync whose expression does not parse", func() string {
		if _, _, err := kubectl(t, nil, "create", "--dry-run=server", "-f", bad); err == nil {
			return "created"
		}
		return ""
	})
	_, stderr, err := kubectl(t, nil, "apply", "-f", bad)
	want := fmt.Sprintf(`admission webhook "syncs.driftless.dev" denied the request: Sync %s/bad: spec.healthChecks[0].failed: ERROR: <input>:1:16: Syntax error`, ns)
	if err == nil || !strings.Contains(stderr, want) {
		t.Errorf("kubectl apply: %v: %s; want %q", err, stderr, want)
	}
	_, stderr, err = kubectl(t, nil, "apply", "-f", sync("costly", "status.conditions.all(a, status.conditions.all(b, a == b))"))
	want = fmt.Sprintf(`Sync %s/costly: spec.healthChecks[0].failed: "status.conditions.all(a, status.conditions.all(b, a == b))" is too costly`, ns)
	if err == nil || !strings.Contains(stderr, want) {
		t.Errorf("kubectl apply: %v: %s; want %q", err, stderr, want)
	}
	if _, stderr, err := kubectl(t, nil, "apply", "-f", sync("good", "status.phase == 'Failed'")); err != nil {
		t.Errorf("kubectl apply of a good Sync: %v: %s", err, stderr)
	}
}
