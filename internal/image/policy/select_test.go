package policy

import (
	"strings"
	"testing"

	"github.com/driftless/driftless/api/v1alpha1"
)

func TestSelect(t *testing.T) {
	tests := []struct {
		name        string
		spec        v1alpha1.ImagePolicySpec
		tags        []string
		want        string
		wantSkipped int
	}{
		{
			name: "a semver range picks the highest version inside it",
			spec: semverSpec(">=1.2 <2"),
			tags: []string{"1.1.9", "1.2.0", "1.10.1", "2.0.0", "1.9.9"},
			want: "1.10.1",
		},
		{
			name:        "tags that are not versions are skipped and counted",
			spec:        semverSpec("^1"),
			tags:        []string{"latest", "main-abc", "1.0.0", "1.0.1"},
			want:        "1.0.1",
			wantSkipped: 2,
		},
		{
			name: "a range matching no tag selects nothing",
			spec: semverSpec(">=3"),
			tags: []string{"1.0.0", "2.0.0"},
			want: "",
		},
		{
			name: "excluded pre-releases are not selected",
			spec: withExclude(semverSpec(">=1.0.0-0"), "-rc"),
			tags: []string{"1.0.0", "1.1.0-rc.1"},
			want: "1.0.0",
		},
		{
			name: "alphabetical ascending picks the last tag",
			spec: v1alpha1.ImagePolicySpec{Policy: v1alpha1.ImagePolicyChoice{Alphabetical: &v1alpha1.OrderPolicy{}}},
			tags: []string{"b", "c", "a"},
			want: "c",
		},
		{
			name: "alphabetical descending picks the first tag",
			spec: v1alpha1.ImagePolicySpec{Policy: v1alpha1.ImagePolicyChoice{Alphabetical: &v1alpha1.OrderPolicy{Order: v1alpha1.OrderDesc}}},
			tags: []string{"b", "c", "a"},
			want: "a",
		},
		{
			name: "numerical compares numbers, not strings, after extracting a named group",
			spec: v1alpha1.ImagePolicySpec{
				Policy:     v1alpha1.ImagePolicyChoice{Numerical: &v1alpha1.OrderPolicy{}},
				FilterTags: &v1alpha1.TagFilter{Pattern: `^main-[a-f0-9]+-(?P<ts>[0-9]+)$`, Extract: "$ts"},
			},
			tags: []string{"main-abc1-9", "main-def2-10", "feature-x-99", "latest"},
			want: "main-def2-10",
		},
		{
			name:        "numerical skips tags that are not numbers",
			spec:        v1alpha1.ImagePolicySpec{Policy: v1alpha1.ImagePolicyChoice{Numerical: &v1alpha1.OrderPolicy{}}},
			tags:        []string{"3", "20", "x"},
			want:        "20",
			wantSkipped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			d := p.Select(tt.tags)
			if d.Tag != tt.want {
				t.Errorf("selected %q, want %q (rejected: %v)", d.Tag, tt.want, d.Rejected)
			}
			if d.Considered != len(tt.tags) || d.Skipped != tt.wantSkipped {
				t.Errorf("considered %d skipped %d, want %d and %d", d.Considered, d.Skipped, len(tt.tags), tt.wantSkipped)
			}
			rejected := len(d.Rejected)
			if tt.want != "" {
				rejected++
			}
			if rejected != len(tt.tags) {
				t.Errorf("%d tags rejected with the selection, want every tag accounted for: %v", rejected, d.Rejected)
			}
		})
	}
}

func TestCompileRejectsBadSpecsNamingTheField(t *testing.T) {
	tests := []struct {
		name  string
		spec  v1alpha1.ImagePolicySpec
		field string
	}{
		{"an invalid range", semverSpec("not a range"), "spec.policy.semver.range"},
		{"an invalid filter", withFilter(semverSpec("^1"), "("), "spec.filterTags.pattern"},
		{"an invalid exclusion", withExclude(semverSpec("^1"), "["), "spec.exclude[0]"},
		{"no policy", v1alpha1.ImagePolicySpec{}, "spec.policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.spec)
			if err == nil || !contains(err.Error(), tt.field) {
				t.Errorf("error = %v, want one naming %s", err, tt.field)
			}
		})
	}
}

func semverSpec(r string) v1alpha1.ImagePolicySpec {
	return v1alpha1.ImagePolicySpec{Image: "example.com/app", Policy: v1alpha1.ImagePolicyChoice{SemVer: &v1alpha1.SemVerPolicy{Range: r}}}
}

func withExclude(s v1alpha1.ImagePolicySpec, e string) v1alpha1.ImagePolicySpec {
	s.Exclude = append(s.Exclude, e)
	return s
}

func withFilter(s v1alpha1.ImagePolicySpec, p string) v1alpha1.ImagePolicySpec {
	s.FilterTags = &v1alpha1.TagFilter{Pattern: p}
	return s
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
