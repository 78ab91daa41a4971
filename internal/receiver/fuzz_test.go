package receiver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzPayloads feeds any body to every provider's parser and matches what
// it parses against the fleet Syncs: nothing may panic, a parsed push
// names a repository and a ref, and only Syncs of a pushed ref are woken.
func FuzzPayloads(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"repository":"git@h:/.git","ref":"refs/heads/"}`))
	f.Add([]byte(`{"repository":{"links":{"clone":[{"href":"ssh://[::1]:22/a"}]}},"changes":[{"refId":"refs/tags/x"}]}`))
	f.Add([]byte(`{"ref":"refs/heads/main","repository":{"clone_url":"file:///srv/git/fleet.git"}}`))
	syncs := fleet()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, name := range ProviderNames() {
			push, err := providers[name].parse(body)
			if err != nil {
				continue
			}
			if (len(push.Repositories) == 0 || len(push.Refs) == 0) && len(push.Artifacts) == 0 {
				t.Fatalf("%s: parsed a push without a repository or ref: %+v", name, push)
			}
			for _, s := range Match(syncs, push) {
				ref := s.Spec.Source.Git.Branch
				if ref == "" {
					ref = s.Spec.Source.Git.Tag
				}
				if !containsSuffix(push.Refs, "/"+ref) {
					t.Fatalf("%s: woke %s/%s, whose ref %q was not pushed (%q)", name, s.Namespace, s.Name, ref, push.Refs)
				}
			}
		}
	})
}

func containsSuffix(refs []string, suffix string) bool {
	for _, r := range refs {
		if strings.HasSuffix(r, suffix) {
			return true
		}
	}
	return false
}
