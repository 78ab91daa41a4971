package engine

import (
	"strings"
	"testing"
)

const kubeConfigHead = `apiVersion: v1
kind: Config
current-context: b
contexts:
- name: b
  context: {cluster: b, user: b}
clusters:
- name: b
  cluster:
    server: https://sa:pw@10.1.2.3:6443/some/path
    certificate-authority-data: ""
users:
- name: b
  user:
`

func TestParseKubeConfig(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		// want is in the error, or "" for none.
		want string
	}{
		{name: "a token is accepted", user: "    token: s3cr3t-token\n"},
		{name: "an exec plugin is refused", user: "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /usr/bin/s3cr3t-helper}\n", want: `user "b" runs an exec plugin, which the agent refuses to run`},
		{name: "an auth provider is refused", user: "    auth-provider: {name: oidc, config: {id-token: s3cr3t-token}}\n", want: `auth-provider plugin "oidc"`},
		{name: "a token file is refused", user: "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", want: "reads its credentials from files"},
		{name: "no credentials are refused", user: "    {}\n", want: "has no credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, server, err := ParseKubeConfig([]byte(kubeConfigHead + tc.user))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if server != "https://10.1.2.3:6443" || cfg.BearerToken != "s3cr3t-token" {
					t.Fatalf("server %q, token %q", server, cfg.BearerToken)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("error quotes the kubeconfig: %v", err)
			}
		})
	}
	if _, _, err := ParseKubeConfig([]byte("token: s3cr3t: [")); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("a broken kubeconfig: error %v", err)
	}
}
