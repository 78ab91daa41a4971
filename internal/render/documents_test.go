package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/api/v1alpha1"
)

func TestRenderSplitsDocuments(t *testing.T) {
	tests := []struct {
		name string
		file string // app.yaml, or app.json if it starts with "{"
		json bool   // app.json anyway
		want []rendered
	}{{
		name: "documents are split on --- lines and keep their start lines",
		file: configMap("a") + "---\n" + configMap("b") + "--- # the third\n" + configMap("c"),
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "app.yaml", Doc: 1, Line: 6}, "ConfigMap/default/b"},
			{Origin{Path: "app.yaml", Doc: 2, Line: 11}, "ConfigMap/default/c"},
		},
	}, {
		name: "a file starting with --- starts with document 0",
		file: "# a header comment\n---\n" + configMap("a"),
		want: []rendered{{Origin{Path: "app.yaml", Doc: 0, Line: 3}, "ConfigMap/default/a"}},
	}, {
		name: "empty and comment-only documents yield nothing but are counted",
		file: "---\n# just a comment\n---\n---\n" + configMap("a") + "---\n\n---\n~\n---\n" + configMap("b") + "---\n",
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 2, Line: 5}, "ConfigMap/default/a"},
			{Origin{Path: "app.yaml", Doc: 5, Line: 14}, "ConfigMap/default/b"},
		},
	}, {
		name: "a ... line ends a document",
		file: configMap("a") + "...\n" + configMap("b") + "...\n# trailing\n---\n" + configMap("c"),
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "app.yaml", Doc: 1, Line: 6}, "ConfigMap/default/b"},
			{Origin{Path: "app.yaml", Doc: 2, Line: 13}, "ConfigMap/default/c"},
		},
	}, {
		name: "a document may start on its --- line",
		file: configMap("a") + "--- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n",
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "app.yaml", Doc: 1, Line: 5}, "ConfigMap/default/b"},
		},
	}, {
		name: "--- inside a block scalar does not split",
		file: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  notes: |\n    ---\n    not a separator\n",
		want: []rendered{{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"}},
	}, {
		name: "Windows line endings and a byte order mark are understood",
		file: "\ufeff---\r\n" + strings.ReplaceAll(configMap("a")+"---\n"+configMap("b"), "\n", "\r\n"),
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 0, Line: 2}, "ConfigMap/default/a"},
			{Origin{Path: "app.yaml", Doc: 1, Line: 7}, "ConfigMap/default/b"},
		},
	}, {
		name: "a v1 List is expanded into its items, which share its origin",
		file: configMap("a") + "---\napiVersion: v1\nkind: List\nitems:\n" +
			"- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n" +
			"- apiVersion: v1\n  kind: List\n  items: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]\n",
		want: []rendered{
			{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "app.yaml", Doc: 1, Line: 6}, "ConfigMap/default/b"},
			{Origin{Path: "app.yaml", Doc: 1, Line: 6}, "ConfigMap/default/c"},
		},
	}, {
		name: "a List that is not core v1 is an ordinary object",
		file: "apiVersion: example.com/v1\nkind: List\nmetadata: {name: l}\nitems: [1]\n",
		want: []rendered{{Origin{Path: "app.yaml", Doc: 0, Line: 1}, "List.example.com/default/l"}},
	}, {
		name: "a JSON file is one document",
		file: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "---"}}`,
		want: []rendered{{Origin{Path: "app.json", Doc: 0, Line: 1}, "ConfigMap/default/a"}},
	}, {
		name: "a JSON List is expanded too",
		file: `{"apiVersion": "v1", "kind": "List", "items": [
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}
		]}`,
		want: []rendered{
			{Origin{Path: "app.json", Doc: 0, Line: 1}, "ConfigMap/default/a"},
			{Origin{Path: "app.json", Doc: 0, Line: 1}, "ConfigMap/default/b"},
		},
	}, {
		name: "an empty JSON file yields nothing",
		json: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "app.yaml"
			if tt.json || strings.HasPrefix(tt.file, "{") {
				name = "app.json"
			}
			objs, err := render(t, map[string]string{name: tt.file}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderSyntaxErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{{
		name:  "invalid YAML names the line in the file, not in the document",
		files: map[string]string{"app.yaml": configMap("a") + "---\napiVersion: v1\nkind: ConfigMap\n  name: b\n"},
		want:  []string{"app.yaml:6 (document 1): invalid YAML: line 8: mapping values are not allowed in this context"},
	}, {
		name:  "a key set twice in a mapping",
		files: map[string]string{"app.yaml": "# x\n---\n" + configMap("a") + "  name: b\n"},
		want:  []string{`app.yaml:3 (document 0): invalid YAML: unmarshal errors: line 7: key "name" already set in map`},
	}, {
		name:  "every invalid document of a file is reported",
		files: map[string]string{"app.yaml": "a: [\n---\n" + configMap("ok") + "---\nb: {\n"},
		want: []string{
			"app.yaml:1 (document 0): invalid YAML: line 1: did not find expected node content",
			"app.yaml:8 (document 2): invalid YAML: line 8: did not find expected node content",
		},
	}, {
		name:  "invalid JSON names the line",
		files: map[string]string{"app.json": "{\n  \"apiVersion\": \"v1\",\n  \"kind\":\n}\n"},
		want:  []string{"app.json:1 (document 0): invalid JSON at line 4: invalid character '}' looking for beginning of value"},
	}, {
		name:  "a JSON file with two objects",
		files: map[string]string{"app.json": "{\"kind\": \"A\"}\n{\"kind\": \"B\"}\n"},
		want:  []string{"app.json:1 (document 0): invalid JSON at line 2: content after the first value; a .json file holds one object or a List"},
	}, {
		name:  "a key set twice in a JSON object names the line",
		files: map[string]string{"app.json": "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\n    \"name\": \"a\",\n    \"name\": \"b\"\n  }\n}\n"},
		want:  []string{`app.json:1 (document 0): invalid JSON at line 6: key "name" is set twice in one object; remove one`},
	}, {
		name: "a key set twice in an object inside a list",
		files: map[string]string{"app.json": `{"apiVersion": "v1", "kind": "List", "items": [
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "kind": "Secret"}
		]}`},
		want: []string{`app.json:1 (document 0): invalid JSON at line 3: key "kind" is set twice in one object; remove one`},
	}, {
		name:  "invalid UTF-8 in a JSON file names the line",
		files: map[string]string{"app.json": "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n \"metadata\": {\"name\": \"a\"},\n \"data\": {\"x\": \"caf\xe9\"}}\n"},
		want:  []string{"app.json: not valid UTF-8 at line 3; save the file as UTF-8"},
	}, {
		name:  "invalid UTF-8 in a YAML file names the line",
		files: map[string]string{"app.yaml": configMap("a") + "data:\n  x: caf\xe9\n"},
		want:  []string{"app.yaml: not valid UTF-8 at line 6; save the file as UTF-8"},
	}, {
		name:  "a JSON file that is not an object",
		files: map[string]string{"app.json": "[1, 2]"},
		want:  []string{"app.json:1 (document 0): document is a list, not an object; every document needs apiVersion and kind"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, Options{})
			if objs != nil {
				t.Errorf("got %d objects with errors, want none", len(objs))
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzRender feeds arbitrary bytes to Render as a YAML or JSON file. Render
// must not panic, and must return either objects that are complete or only
// *Error values.
func FuzzRender(f *testing.F) {
	for _, seed := range []string{
		configMap("a"),
		configMap("a") + "---\n" + configMap("b") + "...\n--- {a: 1}\n",
		"apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}, 3]\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {x: 1}, annotations: [1]}\n",
		"a: &a [*a, *a]\n",
		"a: &a \"<x>\"\nb: &b [*a, *a, *a]\nc: [*b, *b, *b, {<<: *b}]\nd: !!binary &d aGVsbG8=\ne: [*d, *d]\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\ndata: {x: \"caf\xe9\"}\n",
		`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "name": "b"}, "data": [{"x": 1, "x": 2}]}`,
		"---\r\n\ufeff%YAML 1.1\n---\n",
		`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}`,
		`{"apiVersion": "v1", "kind": "List", "items": [{}, null, 1e400]}`,
		crds,
	} {
		f.Add([]byte(seed), strings.HasPrefix(seed, "{"))
	}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "fuzz.yaml"
		if asJSON {
			name = "fuzz.json"
		}
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		objs, err := Render(Options{Root: root, Scope: cluster, SyncLabel: "s.t", Revision: "0123456789"})
		if err != nil {
			if objs != nil {
				t.Errorf("got objects and an error")
			}
			for _, e := range Errors(err) {
				if e.Origin.Path != name {
					t.Errorf("error %q does not name the file", e)
				}
			}
			if len(Errors(err)) == 0 {
				t.Errorf("error %v holds no *Error", err)
			}
			return
		}
		for _, o := range objs {
			u := o.decoded()
			if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
				t.Errorf("incomplete object %v", u.Object)
			}
			if u.GetLabels()[v1alpha1.SyncLabel] != "s.t" || u.GetAnnotations()[v1alpha1.OriginAnnotation] == "" {
				t.Errorf("object %s is not marked", ref(u))
			}
		}
	})
}
