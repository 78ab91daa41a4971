package engine

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/source"
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
			kc, err := ParseKubeConfig([]byte(kubeConfigHead + tc.user))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if kc.Server != "https://10.1.2.3:6443" || kc.Config.BearerToken != "s3cr3t-token" {
					t.Fatalf("server %q, token %q", kc.Server, kc.Config.BearerToken)
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
	if _, err := ParseKubeConfig([]byte("token: s3cr3t: [")); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("a broken kubeconfig: error %v", err)
	}
}

// A tenant's kubeconfig reaches its cluster through its proxy-url: the
// proxy's host must be allowed as the server's is, or the agent would
// connect (with the kubeconfig's credentials) to a host the tenant may
// not reach.
func TestKubeConfigHostsAreCheckedWithTheProxy(t *testing.T) {
	allowed, err := source.ParseHosts([]string{"10.1.2.3", "proxy.corp.example"})
	if err != nil {
		t.Fatal(err)
	}
	kc := func(proxy string) *KubeConfig {
		t.Helper()
		data := kubeConfigHead + "    token: s3cr3t-token\n"
		if proxy != "" {
			data = strings.Replace(data, "    server:", "    proxy-url: "+proxy+"\n    server:", 1)
		}
		k, err := ParseKubeConfig([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		k.Secret = client.ObjectKey{Namespace: "shop", Name: "cluster-b"}
		return k
	}
	for _, tc := range []struct {
		name, proxy, want string
	}{
		{"no proxy: the server alone is checked", "", ""},
		{"an allowed proxy is accepted", "http://proxy.corp.example:3128", ""},
		{"a proxy on another host is refused, naming it", "http://u:s3cr3t@evil.example:3128",
			"the proxy-url of spec.kubeConfig (Secret shop/cluster-b) is on host evil.example:3128"},
		{"a socks5 proxy on another host is refused", "socks5://evil.example:1080", "is on host evil.example:1080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := kc(tc.proxy).CheckHosts(allowed)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var hne *source.HostNotAllowedError
			if !errors.As(err, &hne) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a HostNotAllowedError saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("the error quotes the proxy's password: %v", err)
			}
		})
	}
	if err := kc("").CheckHosts(source.Hosts{}); err != nil {
		t.Fatalf("without --tenant-source-hosts: %v", err)
	}
	if err := kc("http://evil.example:3128").CheckHosts(must(source.ParseHosts([]string{"proxy.corp.example"}))); err == nil ||
		!strings.Contains(err.Error(), "the server of spec.kubeConfig") {
		t.Fatalf("a server not allowed: error %v, want it to name the server", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
