package cli

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigWithClosedContext writes a copy of the test cluster's
// kubeconfig with a second context, "gone", whose API server is a closed
// loopback port, and with the real context in namespace ns.
func kubeconfigWithClosedContext(t *testing.T, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.ControlPlane.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	real := cfg.Contexts["driftless-local"]
	real.Namespace = ns
	cluster := *cfg.Clusters[real.Cluster]
	cluster.Server = "https://" + closed
	cfg.Clusters["gone"] = &cluster
	cfg.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: real.AuthInfo}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGetSyncsAllContextsListsEveryContextAndShowsTheUnreachableOne(t *testing.T) {
	web, api := twoSyncs(t)
	kubeconfig := kubeconfigWithClosedContext(t, web.Namespace)

	r := runCLI(t, "get", "syncs", "--all-contexts", "-A", "--context-timeout", "3s", "--kubeconfig", kubeconfig).expect(t, 0)
	// The table, then why each context that failed did.
	table, why, found := strings.Cut(r.out, "gone: unreachable: ")
	if !found || !strings.Contains(why, "connection refused") {
		t.Errorf("the table is not followed by why gone is unreachable:\n%s", r.out)
	}
	rows := tableRows(t, table)
	type shown struct{ Context, Namespace, Name, Ready string }
	var got []shown
	for _, row := range rows {
		// Other tests' Syncs are in the cluster too.
		if row["CONTEXT"] == "gone" || row["NAMESPACE"] == web.Namespace || row["NAMESPACE"] == api.Namespace {
			got = append(got, shown{row["CONTEXT"], row["NAMESPACE"], row["NAME"], row["READY"]})
		}
	}
	want := []shown{
		{"driftless-local", api.Namespace, "api", "False (FetchFailed)"},
		{"driftless-local", web.Namespace, "web", "True"},
		{"gone", "-", "-", "Unreachable"},
	}
	if api.Namespace > web.Namespace {
		want[0], want[1] = want[1], want[0]
	}
	if len(got) != len(want) {
		t.Fatalf("rows = %v, want %v\n%s", got, want, r.out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v\n%s", i, got[i], want[i], r.out)
		}
	}
	js := runCLI(t, "get", "syncs", "--all-contexts", "-o", "json", "--kubeconfig", kubeconfig).expect(t, 0)
	var doc struct {
		Syncs []struct{ Context, Namespace, Name string }
		// The documented key.
		Unreachable []struct{ Context, Status, Error string } `json:"unreachableContexts"`
	}
	if err := json.Unmarshal([]byte(js.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, js.out)
	}
	// Without -A, each context's own namespace: web's.
	if len(doc.Syncs) != 1 || doc.Syncs[0].Context != "driftless-local" || doc.Syncs[0].Name != "web" || len(doc.Unreachable) != 1 ||
		doc.Unreachable[0].Context != "gone" || doc.Unreachable[0].Status != "Unreachable" {
		t.Errorf("-o json = %+v, want web of driftless-local (its context's namespace) and gone unreachable", doc)
	}
}

func TestGetSyncsAllContextsFailsWhenNoContextAnswers(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["gone"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "u"}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "get", "syncs", "--all-contexts", "--kubeconfig", path).expect(t, 2)
	if !strings.Contains(r.out, "gone: unreachable:") || !strings.Contains(r.errOut, "no context of the kubeconfig could be listed") {
		t.Errorf("stdout:\n%s\nstderr:\n%s\nwant gone shown unreachable and an error", r.out, r.errOut)
	}
}
