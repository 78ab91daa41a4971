package origin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOriginAnnotationRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name     string
		origin   Origin
		revision string
		want     string
	}{
		{"a document of a plain file", Origin{Path: "workloads/app.yaml", Doc: 2}, "8e1a1e868d59786d306e2d6ef3e8c3049fe0ac53", "workloads/app.yaml#2@8e1a1e8"},
		{"a file without a revision", Origin{Path: "app.yaml"}, "", "app.yaml#0"},
		{"a resource a kustomization built", Origin{Path: "apps/prod/kustomization.yaml", From: "apps/base/deploy.yaml"}, "f9eb344", "apps/prod/kustomization.yaml → apps/base/deploy.yaml@f9eb344"},
		{"an object a kustomization generated", Origin{Path: "apps/kustomization.yaml", From: "apps/kustomization.yaml"}, "f9eb344", "apps/kustomization.yaml@f9eb344"},
		{"a path holding @ and #", Origin{Path: "team@x/a#b.yaml", Doc: 1}, "abc1234", "team@x/a#b.yaml#1@abc1234"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Format(tc.origin, tc.revision)
			if got != tc.want {
				t.Fatalf("Format = %q, want %q", got, tc.want)
			}
			o, rev, err := Parse(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.origin, o); diff != "" {
				t.Errorf("Parse(%q) origin (-want +got):\n%s", got, diff)
			}
			if want := tc.revision[:min(7, len(tc.revision))]; rev != want {
				t.Errorf("Parse(%q) revision = %q, want %q", got, rev, want)
			}
		})
	}
}

func TestParseRefusesAnEmptyAnnotation(t *testing.T) {
	if _, _, err := Parse(""); err == nil {
		t.Error("Parse(\"\") = nil error")
	}
}
