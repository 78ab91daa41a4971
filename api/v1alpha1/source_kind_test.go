package v1alpha1

import "testing"

func TestASourceIsOfTheKindItsSpecNames(t *testing.T) {
	for _, c := range []struct {
		name string
		src  Source
		want SourceKind
	}{
		{"git", Source{Git: GitSource{URL: "https://example.com/fleet.git", Branch: "main"}}, SourceGit},
		{"empty spec is git, the default", Source{}, SourceGit},
		{"oci", Source{OCI: &OCISource{URL: "oci://ghcr.io/org/manifests"}}, SourceOCI},
	} {
		if got := c.src.Kind(); got != c.want {
			t.Errorf("%s: Kind() = %q, want %q", c.name, got, c.want)
		}
	}
	if SourceGit != "git" || SourceOCI != "oci" {
		t.Errorf("kinds are %q and %q, want the field names git and oci", SourceGit, SourceOCI)
	}
}
