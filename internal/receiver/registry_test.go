package receiver

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/api/v1alpha1"
)

func ociSync(name string, set func(*v1alpha1.OCISource)) v1alpha1.Sync {
	o := &v1alpha1.OCISource{URL: "oci://registry.example.com/org/fleet"}
	set(o)
	s := syncOf("shop", name, "")
	s.Spec.Source = v1alpha1.Source{OCI: o}
	return s
}

func TestRegistryPushesWakeTheOCISyncsOfTheRepositoryAndTag(t *testing.T) {
	syncs := []v1alpha1.Sync{
		ociSync("latest", func(*v1alpha1.OCISource) {}),
		ociSync("v1", func(o *v1alpha1.OCISource) { o.Tag = "v1" }),
		ociSync("range", func(o *v1alpha1.OCISource) { o.SemVer = ">=1.0.0" }),
		ociSync("pinned", func(o *v1alpha1.OCISource) {
			o.Digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
		}),
		ociSync("other", func(o *v1alpha1.OCISource) { o.URL = "oci://registry.example.com/org/other" }),
		syncOf("shop", "git", "https://registry.example.com/org/fleet"),
	}
	for _, tc := range []struct {
		name     string
		provider string
		body     string
		want     []string
	}{
		{"a Harbor push of v1", Harbor, `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"v1","resource_url":"registry.example.com/org/fleet:v1"}],"repository":{"repo_full_name":"org/fleet"}}}`,
			[]string{"range", "v1"}},
		{"a generic registry push of latest", Registry, `{"repository":"registry.example.com/org/fleet","tag":"latest"}`,
			[]string{"latest", "range"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			push, err := providers[tc.provider].parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range Match(syncs, push) {
				got = append(got, s.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("woken (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := parseHarbor([]byte(`{"type":"DELETE_ARTIFACT"}`)); err == nil {
		t.Error("a Harbor delete event was read as a push")
	}
	if _, err := parseRegistry([]byte(`{"repository":"","tag":"v1"}`)); err == nil {
		t.Error("a registry push without a repository was accepted")
	}
}
