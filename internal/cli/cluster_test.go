package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig whose contexts, named after their
// servers' hosts, are current in the order given.
func writeKubeconfig(t *testing.T, namespaces map[string]string, hosts ...string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, h := range hosts {
		cfg.Clusters[h] = &clientcmdapi.Cluster{Server: "https://" + h}
		cfg.AuthInfos[h] = &clientcmdapi.AuthInfo{Token: "not-a-secret"}
		cfg.Contexts[h] = &clientcmdapi.Context{Cluster: h, AuthInfo: h, Namespace: namespaces[h]}
	}
	cfg.CurrentContext = hosts[0]
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// inAPod makes the in-cluster config available, as in a pod.
func inAPod(t *testing.T) {
	t.Helper()
	saved := inClusterConfig
	inClusterConfig = func() (*rest.Config, error) { return &rest.Config{Host: "https://in-cluster.test"}, nil }
	t.Cleanup(func() { inClusterConfig = saved })
	t.Setenv("POD_NAMESPACE", "agent-ns")
}

func TestEveryCommandFindsItsClusterAsKubectlDoes(t *testing.T) {
	inAPod(t)
	kubeconfig := writeKubeconfig(t, map[string]string{"b.test": "team-b"}, "a.test", "b.test")
	explicit := writeKubeconfig(t, nil, "x.test")
	none := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	for _, tc := range []struct {
		name      string
		env       string
		flags     clusterFlags
		host, ns  string
		inCluster bool
	}{
		{"in a pod with $KUBECONFIG set, the kubeconfig's cluster wins", kubeconfig, clusterFlags{}, "https://a.test", "default", false},
		{"--kubeconfig wins over $KUBECONFIG", kubeconfig, clusterFlags{kubeconfig: explicit}, "https://x.test", "default", false},
		{"--context picks a context of the kubeconfig, and its namespace", kubeconfig, clusterFlags{context: "b.test"}, "https://b.test", "team-b", false},
		{"in a pod without a kubeconfig, the in-cluster config and the pod's namespace", none, clusterFlags{}, "https://in-cluster.test", "agent-ns", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			got, err := tc.flags.load()
			if err != nil {
				t.Fatal(err)
			}
			if got.rest.Host != tc.host || got.namespace != tc.ns || got.inCluster != tc.inCluster {
				t.Errorf("load() = host %s, namespace %s, in-cluster %v; want %s, %s, %v", got.rest.Host, got.namespace, got.inCluster, tc.host, tc.ns, tc.inCluster)
			}
			// The agent (and build, and diff) find the same cluster.
			cfg, inCluster, err := restConfig(tc.flags.kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			if tc.flags.context == "" && (cfg.Host != tc.host || inCluster != tc.inCluster) {
				t.Errorf("the agent's restConfig = host %s, in-cluster %v; want %s, %v", cfg.Host, inCluster, tc.host, tc.inCluster)
			}
		})
	}
}

func TestDiffAndGetTakeTheContextFlag(t *testing.T) {
	inAPod(t)
	t.Setenv("KUBECONFIG", writeKubeconfig(t, nil, "a.test"))
	for _, args := range [][]string{
		{"diff", "--sync", "a/b", "--context", "nosuch"},
		{"get", "syncs", "--context", "nosuch"},
	} {
		r := runCLI(t, args...)
		if r.code == 0 || !strings.Contains(r.errOut, `"nosuch"`) {
			t.Errorf("%s: exit %d, %q; want an error that names the context", strings.Join(args, " "), r.code, r.errOut)
		}
	}
}
