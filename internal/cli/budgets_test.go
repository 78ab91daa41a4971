package cli

import (
	"strings"
	"testing"
)

// build and diff render within the same bounds as the agent, from the
// same --render-max-* flags.
func TestBuildAndDiffRenderWithinTheAgentsBudgets(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
	})
	r := runBuildCommand(t, "--repo", dir, "--render-max-files", "1").expect(t, 2)
	if !strings.Contains(r.errOut, "more than 1 manifest files") || !strings.Contains(r.errOut, "--render-max-files") {
		t.Errorf("build over budget: error does not name the budget and the flag:\n%s", r.errOut)
	}
	runBuildCommand(t, "--repo", dir, "--render-max-files", "2").expect(t, 0)

	for _, cmd := range []string{"agent", "diff", "build"} {
		c, _, err := NewRootCommand(nil, nil).Find([]string{cmd})
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"render-max-files", "render-max-documents", "render-max-objects", "render-max-bytes"} {
			if c.Flags().Lookup(flag) == nil {
				t.Errorf("driftless %s has no --%s", cmd, flag)
			}
		}
	}
}
