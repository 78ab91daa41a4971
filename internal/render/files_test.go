package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRenderReadsFiles(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		paths []string
		want  []rendered
	}{{
		name:  "no paths means the whole checkout",
		files: map[string]string{"app.yaml": configMap("a"), "deep/down/b.yaml": configMap("b")},
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "deep/down/b.yaml", Doc: 0, Line: 1}, "ConfigMap/default/b"},
		},
	}, {
		name: "directories are read depth-first with their entries in lexical order",
		files: map[string]string{
			"b.yaml": configMap("b"), "a/z.yaml": configMap("z"), "a.yaml": configMap("a"), "a/b/c.yml": configMap("c"),
		},
		want: []rendered{
			{Origin{Path: "a/b/c.yml", Doc: 0, Line: 1}, "ConfigMap/default/c"},
			{Origin{Path: "a/z.yaml", Doc: 0, Line: 1}, "ConfigMap/default/z"},
			{Origin{Path: "a.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "b.yaml", Doc: 0, Line: 1}, "ConfigMap/default/b"},
		},
	}, {
		name: "only .yaml, .yml and .json files are read",
		files: map[string]string{
			"a.yaml": configMap("a"), "b.yml": configMap("b"), "c.json": `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}`,
			"d.txt": "not: read", "e.YAML": "not: read", "README.md": "# not read", "f.yaml.bak": "not: read", "yaml": "not: read",
		},
		want: []rendered{
			{Origin{Path: "a.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "b.yml", Doc: 0, Line: 1}, "ConfigMap/default/b"},
			{Origin{Path: "c.json", Doc: 0, Line: 1}, "ConfigMap/default/c"},
		},
	}, {
		name: ".git directories are skipped",
		files: map[string]string{
			".git/config.yaml": "not: read", "vendor/.git/x.yaml": "not: read", "app.yaml": configMap("a"),
		},
		want: []rendered{{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"}},
	}, {
		name: "paths select directories and files, entry by entry",
		files: map[string]string{
			"workloads/a.yaml": configMap("a"), "extra/one.yaml": configMap("one"), "extra/two.yaml": configMap("two"), "other/x.yaml": configMap("x"),
		},
		paths: []string{"./workloads/", "extra/one.yaml", "extra/../other"},
		want: []rendered{
			{Origin{Path: "workloads/a.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "extra/one.yaml", Doc: 0, Line: 1}, "ConfigMap/default/one"},
			{Origin{Path: "other/x.yaml", Doc: 0, Line: 1}, "ConfigMap/default/x"},
		},
	}, {
		name:  "a file reached through two paths is read once, at its first place",
		files: map[string]string{"workloads/a.yaml": configMap("a"), "workloads/b.yaml": configMap("b")},
		paths: []string{"workloads/b.yaml", ".", "workloads"},
		want: []rendered{
			{Origin{Path: "workloads/b.yaml", Doc: 0, Line: 1}, "ConfigMap/default/b"},
			{Origin{Path: "workloads/a.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
		},
	}, {
		name:  "a file of exactly 8 MiB is read",
		files: map[string]string{"big.yaml": configMap("a") + "#" + strings.Repeat(" ", maxFileSize-len(configMap("a"))-1)},
		want:  []rendered{{Origin{Path: "big.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, Options{Paths: tt.paths})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderFileErrors(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		paths    []string
		revision string
		want     []string
	}{{
		name:     "a missing path names the revision",
		paths:    []string{"workloads"},
		revision: "abc1234def5678",
		want:     []string{`path "workloads" not found in the repository at revision abc1234`},
	}, {
		name:  "a missing path without a revision",
		paths: []string{"workloads"},
		want:  []string{`path "workloads" not found in the repository`},
	}, {
		name:  "an absolute path",
		paths: []string{"/etc"},
		want:  []string{`path "/etc" is outside the repository; paths are relative to the repository root and cannot leave it`},
	}, {
		name:  "a path that climbs out of the checkout",
		paths: []string{"workloads/../../secrets"},
		want:  []string{`path "workloads/../../secrets" is outside the repository; paths are relative to the repository root and cannot leave it`},
	}, {
		name:  "an empty path",
		paths: []string{""},
		want:  []string{`path "" is empty; use "." for the whole repository`},
	}, {
		name:  "a path naming a file that is not a manifest",
		files: map[string]string{"notes.txt": "hello"},
		paths: []string{"notes.txt"},
		want:  []string{`path "notes.txt" is not a .yaml, .yml or .json file, nor a kustomization`},
	}, {
		name:  "a file larger than 8 MiB",
		files: map[string]string{"big.yaml": configMap("a") + "#" + strings.Repeat(" ", maxFileSize)},
		want:  []string{"big.yaml: file is larger than the 8 MiB limit; split it into smaller files"},
	}, {
		name:  "every bad path is reported",
		files: map[string]string{"app.yaml": configMap("a")},
		paths: []string{"/etc", ".", "missing"},
		want: []string{
			`path "/etc" is outside the repository; paths are relative to the repository root and cannot leave it`,
			`path "missing" not found in the repository`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, Options{Paths: tt.paths, Revision: tt.revision})
			if objs != nil {
				t.Errorf("got %d objects with errors, want none", len(objs))
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderSymbolicLinks(t *testing.T) {
	// outside is a directory next to the checkout holding what the links
	// must not reveal.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte(configMap("stolen")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files map[string]string
		links map[string]string // link → target; "OUTSIDE" stands for the outside directory
		paths []string
		want  []rendered
		// wantErrs are the origins of the errors, each of whose messages
		// must contain wantText.
		wantErrs []Origin
		wantText string
	}{{
		name:  "a link to a file inside the checkout is read",
		files: map[string]string{"shared/cm.txt": configMap("a")},
		links: map[string]string{"workloads/app.yaml": "../shared/cm.txt"},
		want:  []rendered{{Origin{Path: "workloads/app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"}},
	}, {
		name:  "a link to a directory is not followed",
		files: map[string]string{"workloads/a.yaml": configMap("a")},
		links: map[string]string{"linked": "workloads"},
		want:  []rendered{{Origin{Path: "workloads/a.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"}},
	}, {
		name:     "a link to an absolute path outside the checkout is an error naming the file",
		files:    map[string]string{"workloads/app.yaml": configMap("a")},
		links:    map[string]string{"workloads/secret.yaml": "OUTSIDE/secret.yaml"},
		wantErrs: []Origin{{Path: "workloads/secret.yaml"}},
		wantText: "a link must point at a file inside the repository",
	}, {
		name:     "a relative link that climbs out of the checkout is an error naming the file",
		links:    map[string]string{"workloads/secret.yaml": "../../" + filepath.Base(outside) + "/secret.yaml"},
		wantErrs: []Origin{{Path: "workloads/secret.yaml"}},
		wantText: "a link must point at a file inside the repository",
	}, {
		name:     "a link to nothing is an error naming the file",
		links:    map[string]string{"app.yaml": "gone.yaml"},
		wantErrs: []Origin{{Path: "app.yaml"}},
		wantText: `cannot follow symbolic link to "gone.yaml"`,
	}, {
		name:     "a path that is a link out of the checkout is an error naming the path",
		links:    map[string]string{"elsewhere": "OUTSIDE"},
		paths:    []string{"elsewhere"},
		wantErrs: []Origin{{}},
		wantText: `path "elsewhere" cannot be read`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := checkout(t, tt.files)
			for link, target := range tt.links {
				target = strings.Replace(target, "OUTSIDE", outside, 1)
				p := filepath.Join(root, filepath.FromSlash(link))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.FromSlash(target), p); err != nil {
					t.Fatal(err)
				}
			}
			objs, err := Render(Options{Root: root, Paths: tt.paths, Scope: cluster})
			if diff := cmp.Diff(tt.want, summarize(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			var origins []Origin
			for _, e := range Errors(err) {
				origins = append(origins, e.Origin)
				if !strings.Contains(e.Error(), tt.wantText) {
					t.Errorf("error %q does not say %q", e, tt.wantText)
				}
			}
			if diff := cmp.Diff(tt.wantErrs, origins); diff != "" {
				t.Errorf("error origins (-want +got):\n%s", diff)
			}
		})
	}
}
