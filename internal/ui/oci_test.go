package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
)

// An OCI Sync's page names its registry repository and what of it is
// followed, where a git Sync's names the repository and branch.
func TestDashboardNamesTheArtifactAnOCISyncFollows(t *testing.T) {
	ctx := context.Background()
	defs, err := crd.SyncCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDs(ctx, defs...); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	for name, o := range map[string]v1alpha1.OCISource{
		"tagged": {URL: "oci://registry.example.com/fleet/manifests", Tag: "1.2.0"},
		"ranged": {URL: "oci://registry.example.com/fleet/manifests", SemVer: ">=1.0.0 <2.0.0"},
	} {
		s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{OCI: &o}, Interval: metav1.Duration{Duration: time.Hour}}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	addr, _ := dashboard(t, kubeconfig(t))
	for name, want := range map[string]string{
		"tagged": "From <code>oci://registry.example.com/fleet/manifests</code>, tag 1.2.0.",
		"ranged": "From <code>oci://registry.example.com/fleet/manifests</code>, semver &gt;=1.0.0 &lt;2.0.0.",
	} {
		path := "/c/admin/syncs/" + ns + "/" + name
		resp, body := get(t, addr, path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		if !strings.Contains(body, want) {
			t.Errorf("GET %s does not say %q:\n%s", path, want, body)
		}
	}
}
