package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestAgentRefusesATrustedProxyThatIsNotACIDR(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute([]string{"agent", "--kubeconfig", "/nonexistent/kubeconfig", "--webhook-trusted-proxies", "10.0.0.0/8,ingress"}, &out, &errOut)
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), `--webhook-trusted-proxies "ingress"`) || !strings.Contains(errOut.String(), "CIDRs such as") {
		t.Errorf("error does not name the entry and say what to write: %q", errOut.String())
	}
}

func TestAgentRefusesADashboardTrustedProxyThatIsNotACIDR(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute([]string{"agent", "--kubeconfig", "/nonexistent/kubeconfig", "--ui-bind-address", ":9394", "--ui-trusted-proxies", "10.0.0.0/8,ingress"}, &out, &errOut)
	if code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), `--ui-trusted-proxies "ingress"`) || !strings.Contains(errOut.String(), "CIDRs such as") {
		t.Errorf("error does not name the entry and say what to write: %q", errOut.String())
	}
}
