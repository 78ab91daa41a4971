package charts

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPickVersion(t *testing.T) {
	versions := []string{"1.2.0", "2.0.0", "1.3.0", "1.10.0", "2.1.0-rc.1", "not-semver", "1.3.0+build.2"}
	for _, tc := range []struct {
		name, want, picked string
	}{
		{"an exact version picks itself", "1.2.0", "1.2.0"},
		{"an exact version with build metadata picks that build", "1.3.0+build.2", "1.3.0+build.2"},
		{"a range picks the highest match, numerically", ">=1.2 <2", "1.10.0"},
		{"a wildcard minor picks the highest patch", "1.3.x", "1.3.0"},
		{"empty picks the highest stable version", "", "2.0.0"},
		{"a range without a prerelease skips prereleases", ">=2", "2.0.0"},
		{"a range naming a prerelease allows them", ">=2.1.0-0", "2.1.0-rc.1"},
		{"a range no version matches picks nothing", ">=3", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := pickVersion(versions, tc.want)
			if err != nil {
				t.Fatalf("pickVersion(%q): %v", tc.want, err)
			}
			if got != tc.picked {
				t.Errorf("pickVersion(%q) = %q, want %q", tc.want, got, tc.picked)
			}
		})
	}
}

func TestAvailableVersionsAreListedHighestFirstAndBounded(t *testing.T) {
	_, available, err := pickVersion([]string{"0.1.0", "0.3.0", "0.2.0", "1.0.0", "0.9.0", "0.10.0", "x"}, ">=5")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1.0.0", "0.10.0", "0.9.0", "0.3.0", "0.2.0", "0.1.0"}, available); diff != "" {
		t.Errorf("available versions (-want +got):\n%s", diff)
	}
	if got, want := listVersions(available), "1.0.0, 0.10.0, 0.9.0, 0.3.0, 0.2.0 (and 1 more)"; got != want {
		t.Errorf("listVersions = %q, want %q", got, want)
	}
}

func FuzzPickVersion(f *testing.F) {
	f.Add("1.2.0", ">=1.2 <2")
	f.Add("1.3.0+build_1", "~1.3")
	f.Fuzz(func(t *testing.T, version, want string) {
		picked, _, err := pickVersion([]string{version, "1.0.0"}, want)
		if err == nil && picked != "" && picked != version && picked != "1.0.0" {
			t.Errorf("picked %q, which was not offered", picked)
		}
	})
}

func TestOCIRepositoryAddress(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ref          Ref
		repo, scheme string
	}{
		{"the chart is the last element", Ref{OCI: "oci://registry.example.com/charts/web"}, "registry.example.com/charts/web", "https"},
		{"a name is appended when it is not the last element", Ref{OCI: "oci://registry.example.com/charts/", Name: "web"}, "registry.example.com/charts/web", "https"},
		{"a name that is the last element is not repeated", Ref{OCI: "oci://registry.example.com/charts/web", Name: "web"}, "registry.example.com/charts/web", "https"},
		{"insecure talks plain HTTP", Ref{OCI: "oci://registry.example.com/charts/web", Insecure: true}, "registry.example.com/charts/web", "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, err := ociRepository(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if repo.Name() != tc.repo || repo.Scheme() != tc.scheme {
				t.Errorf("repository = %s over %s, want %s over %s", repo.Name(), repo.Scheme(), tc.repo, tc.scheme)
			}
		})
	}
}
