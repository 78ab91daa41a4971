package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/secrets"
)

// A kind of a capability: the name a page must use for it (any of
// names), and what in the code makes it exist.
type docKind struct {
	names []string
	code  string
}

// keyServices are the key services SOPS files may be encrypted for, one
// per kind of key Secret entry that internal/secrets reads.
var keyServices = []docKind{
	{[]string{"age"}, "entries *" + secrets.KeySuffix},
	{[]string{"PGP"}, "entries *" + secrets.PGPSuffix},
	{[]string{"AWS KMS"}, "entry " + secrets.AWSEntry},
	{[]string{"GCP KMS"}, "entry " + secrets.GCPEntry},
	{[]string{"Azure Key Vault"}, "entry " + secrets.AzureEntry},
	{[]string{"Vault Transit"}, "entry " + secrets.VaultEntry},
}

// sourceKinds are the fields of a Sync's spec.source, one per kind.
func sourceKinds(t *testing.T) []docKind {
	t.Helper()
	names := map[string][]string{"git": {"git"}, "oci": {"OCI"}}
	var kinds []docKind
	src := reflect.TypeOf(v1alpha1.Source{})
	for i := range src.NumField() {
		field := jsonName(src.Field(i))
		n, ok := names[field]
		if !ok {
			t.Fatalf("spec.source.%s is a kind of source this test does not know: add the name the docs use for it", field)
		}
		kinds = append(kinds, docKind{n, "spec.source." + field})
	}
	return kinds
}

// targetKinds are the clusters a Sync applies to: the agent's own, and
// the one of spec.kubeConfig.
func targetKinds(t *testing.T) []docKind {
	t.Helper()
	f, ok := reflect.TypeOf(v1alpha1.SyncSpec{}).FieldByName("KubeConfig")
	if !ok {
		t.Fatal("SyncSpec has no KubeConfig: update the target kinds of this test")
	}
	return []docKind{
		{[]string{"own cluster", "cluster its agent runs in", "cluster the agent runs in", "agent's cluster"}, "a Sync without spec.kubeConfig"},
		{[]string{"kubeConfig"}, "spec." + jsonName(f)},
	}
}

// docListing is where a page lists the kinds of a capability: the
// paragraph (lines between blank lines; a table row is its own
// paragraph) that contains at.
type docListing struct {
	page, at, what string
	kinds          []docKind
}

// TestDocsNameEveryKindWhereTheyListThem checks that the index and each
// capability's page agree with the code, and so with each other, on the
// key services a SOPS file may use, the kinds of source and the kinds of
// target cluster: where a page lists them, it names every one. No page
// says a kind does not exist.
func TestDocsNameEveryKindWhereTheyListThem(t *testing.T) {
	sources, targets := sourceKinds(t), targetKinds(t)
	listings := []docListing{
		{"README.md", "SOPS files encrypted for", "key services", keyServices},
		{"secrets.md", "A file's data key may be", "key services", keyServices},
		{"sync.md", "| `decryption` |", "key services", keyServices},
		{"security.md", "`spec.decryption.secretRef`", "key services", keyServices},
		{"sources.md", "# Sources:", "source kinds", sources},
		{"sync.md", "| `source.git.url` |", "source kinds", sources[:1]},
		{"sync.md", "| `source.oci` |", "source kinds", sources[1:]},
		{"security.md", "This page says who can make it do", "source kinds", sources},
		{"README.md", "Apply to another cluster", "target kinds", targets[1:]},
		{"remote-clusters.md", "A Sync normally applies to", "target kinds", targets},
		{"sync.md", "| `kubeConfig` |", "target kinds", targets[1:]},
		{"security.md", "This page says who can make it do", "target kinds", targets},
	}
	root := filepath.Join("..", "..", "docs")
	problems := map[string][]string{}
	for _, l := range listings {
		data, err := os.ReadFile(filepath.Join(root, l.page))
		if err != nil {
			t.Errorf("docs/%s: %v", l.page, err)
			continue
		}
		para, ok := paragraphWith(string(data), l.at)
		if !ok {
			problems[l.page] = append(problems[l.page], fmt.Sprintf("docs/%s has no paragraph with %q, where it lists the %s", l.page, l.at, l.what))
			continue
		}
		for _, k := range l.kinds {
			if !containsAny(para, k.names) {
				problems[l.page] = append(problems[l.page], fmt.Sprintf("docs/%s lists the %s (the paragraph with %q) without %s (%s): name it there", l.page, l.what, l.at, k.names[0], k.code))
			}
		}
	}
	denials := []string{"no remote targets", "no remote clusters", "no OCI", "git only", "only git"}
	pages, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range denials {
			if strings.Contains(strings.ToLower(string(data)), strings.ToLower(d)) {
				name := filepath.Base(page)
				problems[name] = append(problems[name], fmt.Sprintf("docs/%s says %q, which the code contradicts", name, d))
			}
		}
	}
	for _, page := range pages {
		name := filepath.Base(page)
		switch {
		case pendingPages[name] && len(problems[name]) == 0:
			t.Errorf("docs/%s names every kind now: remove it from pendingPages", name)
		case pendingPages[name]:
			for _, p := range problems[name] {
				t.Logf("pending (%s is being rewritten): %s", name, p)
			}
		default:
			for _, p := range problems[name] {
				t.Error(p)
			}
		}
	}
}

// pendingPages are pages being rewritten elsewhere (issue #46): what
// this test finds on them is logged, not failed, until they pass, when
// the test asks for their removal from here.
var pendingPages = map[string]bool{}

// paragraphWith returns the paragraph of text that contains at: the
// line, for a table row; otherwise the lines around it up to blank lines.
func paragraphWith(text, at string) (string, bool) {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if !strings.Contains(line, at) {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "|") || strings.HasPrefix(line, "#") {
			return line, true
		}
		start, end := i, i
		for start > 0 && strings.TrimSpace(lines[start-1]) != "" {
			start--
		}
		for end < len(lines)-1 && strings.TrimSpace(lines[end+1]) != "" {
			end++
		}
		return strings.Join(lines[start:end+1], " "), true
	}
	return "", false
}

func containsAny(text string, names []string) bool {
	flat := strings.Join(strings.Fields(text), " ")
	for _, n := range names {
		if strings.Contains(flat, n) {
			return true
		}
	}
	return false
}
