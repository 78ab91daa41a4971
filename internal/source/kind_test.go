package source

import (
	"testing"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
)

func TestARequestIsOfTheKindOfItsSource(t *testing.T) {
	if k := (Request{URL: "https://example.com/fleet.git"}).Kind(); k != v1alpha1.SourceGit {
		t.Errorf("git request: Kind() = %q, want %q", k, v1alpha1.SourceGit)
	}
	if k := (Request{URL: "oci://ghcr.io/org/manifests", OCI: &oci.Request{URL: "oci://ghcr.io/org/manifests"}}).Kind(); k != v1alpha1.SourceOCI {
		t.Errorf("OCI request: Kind() = %q, want %q", k, v1alpha1.SourceOCI)
	}
}
