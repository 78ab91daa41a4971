package ui

import "testing"

func TestFileLinkPointsAtTheForgesViewOfTheFileAtTheRevision(t *testing.T) {
	const rev = "8e1a1e868d59786d306e2d6ef3e8c3049fe0ac53"
	for _, tc := range []struct {
		name, url, file string
		line            int
		want            string
	}{
		{"GitHub over SSH, scp-like", "git@github.com:org/fleet.git", "apps/web.yaml", 3,
			"https://github.com/org/fleet/blob/" + rev + "/apps/web.yaml#L3"},
		{"GitHub over HTTPS, a document's origin", "https://github.com/org/fleet", "apps/web.yaml#1", 0,
			"https://github.com/org/fleet/blob/" + rev + "/apps/web.yaml"},
		{"GitLab in a subgroup over ssh://", "ssh://git@gitlab.com:22/group/sub/fleet.git", "a b.yaml", 0,
			"https://gitlab.com/group/sub/fleet/-/blob/" + rev + "/a%20b.yaml"},
		{"self-hosted GitLab", "https://gitlab.example.com/ops/fleet.git", "x.yaml", 0,
			"https://gitlab.example.com/ops/fleet/-/blob/" + rev + "/x.yaml"},
		{"Gitea", "https://gitea.example.com/ops/fleet.git", "x.yaml", 7,
			"https://gitea.example.com/ops/fleet/src/commit/" + rev + "/x.yaml#L7"},
		{"a kustomization's object links the file it came from", "https://codeberg.org/ops/fleet", "apps/kustomization.yaml → base/web.yaml", 0,
			"https://codeberg.org/ops/fleet/src/commit/" + rev + "/base/web.yaml"},
		{"an unknown host gets no link", "https://git.example.com/ops/fleet.git", "x.yaml", 0, ""},
		{"file:// gets no link", "file:///srv/fleet.git", "x.yaml", 0, ""},
		{"a path that climbs gets no link", "https://github.com/../../evil", "x.yaml", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fileLink(tc.url, rev, tc.file, tc.line); got != tc.want {
				t.Errorf("fileLink(%q, rev, %q, %d) = %q, want %q", tc.url, tc.file, tc.line, got, tc.want)
			}
		})
	}
	if got := fileLink("git@github.com:org/fleet.git", "", "x.yaml", 0); got != "" {
		t.Errorf("without a revision: %q, want no link", got)
	}
}
