package receiver

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tenantSecret creates namespace's webhook Secret with a GitHub key.
func (f *fixture) tenantSecret(namespace, github string) {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: TenantSecretName}, Data: map[string][]byte{GitHub: []byte(github)}}
	if err := f.api.Create(context.Background(), s); err != nil {
		f.t.Fatal(err)
	}
}

func at(req request, path string) request {
	req.path = path
	return req
}

func TestATeamsSecretWakesOnlyItsNamespacesSyncs(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "agent-s3cret"})
	f.tenantSecret("team-a", "team-a-s3cret")
	f.tenantSecret("team-b", "team-b-s3cret")
	body := readPayload(t, "github-push.json")

	code, reply := f.do(at(signed(GitHub, "team-a-s3cret", body, "a-1"), "/hooks/github/team-a"))
	if code != http.StatusOK {
		t.Fatalf("team A's push at its endpoint: %d %s", code, reply.Message)
	}
	want := []string{"team-a/fleet-https", "team-a/fleet-scp", "team-a/fleet-token"}
	if diff := cmp.Diff(want, f.woken()); diff != "" {
		t.Errorf("Syncs woken by team A's push (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ name, secret, path string }{
		{"team B's secret at team A's endpoint", "team-b-s3cret", "/hooks/github/team-a"},
		{"team A's secret at the agent's endpoint", "team-a-s3cret", "/hooks/github"},
		{"the agent's secret at team A's endpoint", "agent-s3cret", "/hooks/github/team-a"},
		{"a namespace without the Secret", "team-a-s3cret", "/hooks/github/team-c"},
	} {
		code, reply := f.do(at(signed(GitHub, tc.secret, body, "x-"+tc.name), tc.path))
		if code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", tc.name, code, reply.Message)
		}
		if got := f.woken(); len(got) != 0 {
			t.Errorf("%s woke %v", tc.name, got)
		}
	}

	// The agent's secret keeps waking every namespace's Syncs.
	code, reply = f.do(signed(GitHub, "agent-s3cret", body, "agent-1"))
	if code != http.StatusOK {
		t.Fatalf("the agent's push: %d %s", code, reply.Message)
	}
	if diff := cmp.Diff(fleetMain, f.woken()); diff != "" {
		t.Errorf("Syncs woken by the agent's push (-want +got):\n%s", diff)
	}

	// A path that is not a namespace's name is no endpoint.
	code, _ = f.do(at(signed(GitHub, "team-a-s3cret", body, "bad"), "/hooks/github/Team_A"))
	if code != http.StatusNotFound {
		t.Errorf("a malformed namespace: %d, want 404", code)
	}
}
