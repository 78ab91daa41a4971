package setters

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/internal/image/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fakeLookup answers from fixed selections; implied policies are
// selected with the real policy package from fixed tag lists.
type fakeLookup struct{}

var selections = map[string]Latest{
	"flux-system/app": {Image: "registry.example.com/app", Tag: "1.2.3",
		Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111"},
	"flux-system/web":     {Image: "registry.example.com:5000/team/web", Tag: "2.0.1"},
	"flux-system/pending": {Image: "registry.example.com/pending"},
}

var registryTags = map[string][]string{
	"registry.example.com/legacy":  {"1.2.0", "1.2.7", "1.3.0", "latest", "v1.0", "1.2.10-rc.1"},
	"registry.example.com/sidecar": {"main-1", "main-3", "dev-9"},
}

func (fakeLookup) Policy(ns, name string) (Latest, error) {
	if name == "unscanned" {
		return Latest{}, fmt.Errorf("has selected no tag yet: %w", ErrNotScanned)
	}
	l, ok := selections[ns+"/"+name]
	if !ok {
		return Latest{}, fmt.Errorf("%s/%s: %w", ns, name, ErrNoPolicy)
	}
	return l, nil
}

func (fakeLookup) Implied(p Implied) (Latest, error) {
	compiled, err := policy.Compile(p.Spec)
	if err != nil {
		return Latest{}, err
	}
	d := compiled.Select(registryTags[p.Spec.Image])
	return Latest{Image: p.Spec.Image, Tag: d.Tag}, nil
}

// TestUpdateGolden rewrites each testdata/golden/<case>/in into a copy and
// compares it with <case>/want, file by file, and the changes with
// <case>/changes.txt. go test -run TestUpdateGolden -update rewrites them.
func TestUpdateGolden(t *testing.T) {
	cases, err := os.ReadDir("testdata/golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name(), func(t *testing.T) {
			dir := filepath.Join("testdata/golden", c.Name())
			work := t.TempDir()
			if err := os.CopyFS(work, os.DirFS(filepath.Join(dir, "in"))); err != nil {
				t.Fatal(err)
			}
			res, err := Update(Options{Root: work}, fakeLookup{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Problems) > 0 {
				t.Fatalf("problems: %v", res.Problems)
			}
			var report strings.Builder
			for _, ch := range res.Changes {
				fmt.Fprintf(&report, "%s:%d %s: %s -> %s (%s)\n", ch.File, ch.Line, ch.Image, ch.Old, ch.New, ch.Policy)
			}
			golden(t, filepath.Join(dir, "changes.txt"), report.String())
			entries, err := os.ReadDir(work)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				got, err := os.ReadFile(filepath.Join(work, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				golden(t, filepath.Join(dir, "want", e.Name()), string(got))
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestUpdateReportsProblemsWithFileAndLineAndLeavesTheFileAlone(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{
			name:    "a marker naming a policy that does not exist",
			content: "a: 1\nimage: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"flux-system:nope\"}\nb: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"flux-system:app\"}\n",
			want:    "app.yaml:2: the marker names ImagePolicy flux-system/nope, which does not exist",
		},
		{
			name:    "a marker that is not JSON",
			content: "image: app:1.0.0 # {$imagepolicy: flux-system:app}\n",
			want:    "app.yaml:1: marker",
		},
		{
			name:    "a marker without a namespace",
			content: "x: 1\n\nimage: app:1.0.0 # {\"$imagepolicy\": \"app\"}\n",
			want:    `app.yaml:3: marker "{\"$imagepolicy\": \"app\"}": want "namespace:name"`,
		},
		{
			name:    "a marker with an unknown field",
			content: "image: app:1.0.0 # {\"$imagepolicy\": \"flux-system:app:version\"}\n",
			want:    `unknown field "version"`,
		},
		{
			name:    "a policy that selected nothing yet",
			content: "image: app:1.0.0 # {\"$imagepolicy\": \"flux-system:pending\"}\n",
			want:    "app.yaml:1: ImagePolicy flux-system/pending: has selected no tag yet",
		},
		{
			name:    "a Flux v1 pattern of an unknown kind",
			content: "kind: Deployment\nmetadata:\n  name: d\n  annotations:\n    fluxcd.io/automated: \"true\"\n    fluxcd.io/tag.app: wildcard:1.*\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.example.com/legacy:1.0\n",
			want:    `app.yaml:12: Deployment/d: annotation tag.app "wildcard:1.*": unknown kind`,
		},
		{
			name:    "a file that is not YAML",
			content: "a: [1, 2\nb: 3\n",
			want:    "app.yaml:",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, "app.yaml")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := Update(Options{Root: root}, fakeLookup{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Problems) == 0 || !strings.Contains(res.Problems[0].Error(), tt.want) {
				t.Fatalf("problems %v, want one containing %q", res.Problems, tt.want)
			}
			if len(res.Changes) != 0 || len(res.Files) != 0 {
				t.Errorf("changes %v in files %v, want none from a file with a problem", res.Changes, res.Files)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.content {
				t.Errorf("the file was changed:\n%s", got)
			}
		})
	}
}

func TestUpdateOnlyLooksUnderThePaths(t *testing.T) {
	root := t.TempDir()
	marked := "image: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"flux-system:app\"}\n"
	for _, dir := range []string{"apps", "other"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "a.yaml"), []byte(marked), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Update(Options{Root: root, Paths: []string{"./apps"}}, fakeLookup{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"apps/a.yaml"}, res.Files); diff != "" {
		t.Errorf("files rewritten (-want +got):\n%s", diff)
	}
	if _, err := Update(Options{Root: root, Paths: []string{"../etc"}}, fakeLookup{}); err == nil {
		t.Error("a path leaving the repository was walked")
	}
}

func TestUpdateDryRunWritesNothing(t *testing.T) {
	root := t.TempDir()
	content := "image: registry.example.com/app:1.0.0 # {\"$imagepolicy\": \"flux-system:app\"}\n"
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Update(Options{Root: root, DryRun: true}, fakeLookup{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 {
		t.Errorf("changes %v, want the one marker", res.Changes)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "a.yaml")); string(got) != content {
		t.Errorf("dry run wrote:\n%s", got)
	}
}

// A policy that has not scanned yet is a wait, not a failure: its problem
// says so (Waiting), where a policy that scanned and selected nothing is
// a failure to report.
func TestAPolicyNotScannedYetIsAWaitingProblem(t *testing.T) {
	root := t.TempDir()
	content := "a: app:1.0.0 # {\"$imagepolicy\": \"flux-system:unscanned\"}\n" +
		"b: app:1.0.0 # {\"$imagepolicy\": \"flux-system:pending\"}\n"
	if err := os.WriteFile(filepath.Join(root, "app.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Update(Options{Root: root}, fakeLookup{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 2 {
		t.Fatalf("problems %v, want two", res.Problems)
	}
	for _, p := range res.Problems {
		if want := strings.Contains(p.Message, "unscanned"); p.Waiting != want {
			t.Errorf("problem %q: Waiting = %v, want %v", p.Error(), p.Waiting, want)
		}
	}
}
