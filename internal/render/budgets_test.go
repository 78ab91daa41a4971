package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/internal/testenv"
)

// aliasBomb is a document whose one anchored string of size bytes is
// repeated n times through aliases.
func aliasBomb(size, n int) string {
	var b strings.Builder
	b.WriteString(configMap("bomb"))
	b.WriteString("data:\n  a: &a \"" + strings.Repeat("x", size) + "\"\n")
	for i := range n {
		fmt.Fprintf(&b, "  a%d: *a\n", i)
	}
	return b.String()
}

// laughs is a "billion laughs" document: each of depth levels lists the
// level below nine times, so the last one expands to 9^depth strings.
func laughs(depth int) string {
	var b strings.Builder
	b.WriteString(configMap("lol"))
	b.WriteString("data:\n  l0: &l0 \"lol\"\n")
	for i := 1; i <= depth; i++ {
		p := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.Repeat(p+", ", 8)+p)
	}
	return b.String()
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestRenderStopsAliasBombsBeforeExpandingThem(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string
	}{{
		name: "one 1 MiB string aliased 1,000 times",
		file: aliasBomb(1<<20, 1000),
		want: "app.yaml:1 (document 0): render budget exceeded: expanding the YAML aliases of this document would take more than the 64 MiB left of the limit of 64 MiB on decoded documents; repeat large values through aliases less often; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes",
	}, {
		name: "nine levels of nine aliases each",
		file: laughs(9),
		want: "app.yaml:1 (document 0): render budget exceeded: expanding the YAML aliases of this document would take more than the 64 MiB left of the limit of 64 MiB on decoded documents; repeat large values through aliases less often; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes",
	}, {
		name: "a string JSON must escape counts at its escaped size",
		file: "# escapes\n---\n" + strings.ReplaceAll(aliasBomb(1<<20, 30), "xxxx", "<<<<"),
		want: "app.yaml:3 (document 0): render budget exceeded: expanding the YAML aliases of this document would take more than the 64 MiB left of the limit of 64 MiB on decoded documents; repeat large values through aliases less often; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := checkout(t, map[string]string{"app.yaml": tt.file})
			var objs []Object
			var err error
			heap := allocated(func() { objs, err = Render(Options{Root: root, Scope: cluster}) })
			if objs != nil {
				t.Errorf("got %d objects, want none", len(objs))
			}
			if !errors.Is(err, ErrOverBudget) {
				t.Errorf("error does not wrap ErrOverBudget: %v", err)
			}
			if diff := cmp.Diff([]string{tt.want}, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			// The file is at most 2 MiB; expanded, it would take gigabytes.
			if limit := uint64(64 << 20); heap > limit {
				t.Errorf("render allocated %s, want at most %s", formatBytes(int64(heap)), formatBytes(int64(limit)))
			}
		})
	}
}

func TestRenderCountsAliasesAgainstTheBudget(t *testing.T) {
	// 1 KiB aliased 20 times: 21 KiB decoded from a file of about 1.3 KiB.
	files := map[string]string{"app.yaml": aliasBomb(1<<10, 20)}
	objs, err := render(t, files, Options{Budgets: Budgets{MaxBytes: 16 << 10}})
	if objs != nil {
		t.Errorf("got %d objects with 16 KiB, want none", len(objs))
	}
	want := []string{"app.yaml:1 (document 0): render budget exceeded: expanding the YAML aliases of this document would take more than the 16 KiB left of the limit of 16 KiB on decoded documents; repeat large values through aliases less often; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes"}
	if diff := cmp.Diff(want, messages(err)); diff != "" {
		t.Errorf("errors with 16 KiB (-want +got):\n%s", diff)
	}

	objs, err = render(t, files, Options{Budgets: Budgets{MaxBytes: 32 << 10}})
	if err != nil {
		t.Fatalf("with 32 KiB: %v", err)
	}
	if data := objs[0].decoded().Object["data"].(map[string]any); len(data) != 21 || data["a19"] != strings.Repeat("x", 1<<10) {
		t.Errorf("aliases were not expanded: %d keys", len(data))
	}
}

func TestRenderBudgets(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		budgets Budgets
		want    []string
	}{{
		name:    "more files than MaxFiles",
		files:   map[string]string{"a.yaml": configMap("a"), "b.yaml": configMap("b"), "c/d.json": "{}", "notes.txt": "not a manifest"},
		budgets: Budgets{MaxFiles: 2},
		want:    []string{"render budget exceeded: the paths hold more than 2 manifest files; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-files"},
	}, {
		name:    "exactly MaxFiles files",
		files:   map[string]string{"a.yaml": configMap("a"), "b.yaml": configMap("b"), "notes.txt": "not a manifest"},
		budgets: Budgets{MaxFiles: 2},
	}, {
		name:    "more documents than MaxDocuments, empty ones included",
		files:   map[string]string{"a.yaml": configMap("a") + "---\n---\n" + configMap("b"), "b.yaml": configMap("c")},
		budgets: Budgets{MaxDocuments: 2},
		want:    []string{"a.yaml:7 (document 2): render budget exceeded: this is document 3 of the render, over the limit of 2; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-documents"},
	}, {
		name:    "more objects than MaxObjects, List items included",
		files:   map[string]string{"a.yaml": configMap("a"), "b.yaml": "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n"},
		budgets: Budgets{MaxObjects: 2},
		want:    []string{"b.yaml:1 (document 0): ConfigMap/c: render budget exceeded: this is object 3 of the render, over the limit of 2; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-objects"},
	}, {
		name:    "files holding more than MaxBytes",
		files:   map[string]string{"a.yaml": configMap("a") + "data: {x: " + strings.Repeat("x", 1000) + "}\n", "b.yaml": configMap("b") + "#" + strings.Repeat(" ", 1500)},
		budgets: Budgets{MaxBytes: 2 << 10},
		want:    []string{"b.yaml: render budget exceeded: the files read before this one hold 1.0 KiB and this one 1.5 KiB, over the limit of 2 KiB; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes"},
	}, {
		name:    "errors found before the budget ran out are reported too",
		files:   map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\n", "b.yaml": configMap("b"), "c.yaml": configMap("c")},
		budgets: Budgets{MaxObjects: 1},
		want: []string{
			"a.yaml:1 (document 0): ConfigMap: object has no metadata.name; give it a name",
			"c.yaml:1 (document 0): ConfigMap/c: render budget exceeded: this is object 2 of the render, over the limit of 1; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-objects",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, Options{Budgets: tt.budgets})
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if objs != nil {
				t.Errorf("got %d objects, want none", len(objs))
			}
			if !errors.Is(err, ErrOverBudget) {
				t.Errorf("error does not wrap ErrOverBudget: %v", err)
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderRefusesATreeOfManyFilesWithTheDefaults(t *testing.T) {
	if testing.Short() && !testenv.CI() {
		t.Skip("writes 100,000 files")
	}
	// The render refuses the tree before it reads a file, so the files of
	// a directory are hard links to its first, which are faster to make.
	root := t.TempDir()
	const dirs, perDir = 100, 1000
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		first := filepath.Join(dir, "cm-000.yaml")
		if err := os.WriteFile(first, []byte(configMap("a")), 0o644); err != nil {
			t.Fatal(err)
		}
		for f := 1; f < perDir; f++ {
			if err := os.Link(first, filepath.Join(dir, fmt.Sprintf("cm-%03d.yaml", f))); err != nil {
				t.Fatal(err)
			}
		}
	}
	objs, err := Render(Options{Root: root, Scope: cluster})
	if objs != nil {
		t.Errorf("got %d objects, want none", len(objs))
	}
	want := []string{"render budget exceeded: the paths hold more than 50000 manifest files; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-files"}
	if diff := cmp.Diff(want, messages(err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:               "0 B",
		1023:            "1023 B",
		1024:            "1 KiB",
		1536:            "1.5 KiB",
		128 << 20:       "128 MiB",
		(3 << 30) / 2:   "1.5 GiB",
		(128 << 20) + 1: "128.0 MiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestDocsStateTheDefaultBudgets keeps the table of docs/sync.md true to
// DefaultBudgets.
func TestDocsStateTheDefaultBudgets(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "sync.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Render budgets\n")
	if !ok {
		t.Fatal(`docs/sync.md has no "### Render budgets" section`)
	}
	thousands := func(n int) string {
		s := fmt.Sprint(n)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	d := DefaultBudgets()
	for flag, value := range map[string]string{
		"--render-max-files":     thousands(d.MaxFiles),
		"--render-max-documents": thousands(d.MaxDocuments),
		"--render-max-objects":   thousands(d.MaxObjects),
		"--render-max-bytes":     formatBytes(d.MaxBytes),
	} {
		if want := "| " + value + " | `" + flag + "` |"; !strings.Contains(section, want) {
			t.Errorf("docs/sync.md's render budgets table has no row ending %q", want)
		}
	}
}
