package cli

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// TestDocsIndexListsEveryCapability checks docs/README.md, the page that
// lists every capability, against the code, so that a feature and its
// doc cannot disagree about whether it exists: every command and every
// field of a Sync's spec is named there, every command and spec field it
// names exists, every kind of the API is named, and every page of docs/
// is linked from it.
func TestDocsIndexListsEveryCapability(t *testing.T) {
	root := filepath.Join("..", "..")
	index := filepath.Join(root, "docs", "README.md")
	data, err := os.ReadFile(index)
	if err != nil {
		t.Fatalf("docs/README.md, the list of capabilities, cannot be read: %v", err)
	}
	text := string(data)
	cmdRoot := NewRootCommand(io.Discard, io.Discard)

	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Hidden || cmd.Name() == "help" || cmd.Name() == "completion" {
			return
		}
		if cmd.HasParent() && cmd.Runnable() && !strings.Contains(text, "`"+cmd.CommandPath()+"`") && !strings.Contains(text, "`"+cmd.CommandPath()+" ") {
			t.Errorf("docs/README.md does not name the command `%s`: add it to the row of its capability", cmd.CommandPath())
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(cmdRoot)
	for _, m := range namedCommand.FindAllStringSubmatch(text, -1) {
		words := strings.Fields(m[1])
		var args []string
		for _, w := range words {
			if strings.HasPrefix(w, "-") {
				break
			}
			args = append(args, w)
		}
		if found, rest, err := cmdRoot.Find(args); err != nil || found == cmdRoot || len(rest) > 0 {
			t.Errorf("docs/README.md names `driftless %s`, which is not a command", m[1])
		}
	}

	spec := reflect.TypeOf(v1alpha1.SyncSpec{})
	for i := range spec.NumField() {
		name := jsonName(spec.Field(i))
		if name != "" && !regexp.MustCompile("`spec\\."+name+"[`.]").MatchString(text) {
			t.Errorf("docs/README.md does not name the Sync field `spec.%s`: add it to the row of its capability", name)
		}
	}
	for _, m := range namedField.FindAllStringSubmatch(text, -1) {
		if !fieldExists(spec, strings.Split(m[1], ".")) {
			t.Errorf("docs/README.md names `spec.%s`, which is not a field of a Sync's spec", m[1])
		}
	}

	scheme := testenv.Scheme()
	// The kinds of the API, and HelmChart, which is read from git only.
	kinds := []string{reflect.TypeOf(v1alpha1.HelmChart{}).Name()}
	api := reflect.TypeOf(v1alpha1.Sync{}).PkgPath()
	for kind, typ := range scheme.KnownTypes(v1alpha1.GroupVersion) {
		if typ.PkgPath() == api && !strings.HasSuffix(kind, "List") {
			kinds = append(kinds, kind)
		}
	}
	for _, kind := range kinds {
		if !strings.Contains(text, "`"+kind+"`") && !strings.Contains(text, " "+kind+" ") {
			t.Errorf("docs/README.md does not name the kind %s", kind)
		}
	}

	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		name := filepath.Base(page)
		if name != "README.md" && !strings.Contains(text, "]("+name+")") && !strings.Contains(text, "]("+name+"#") {
			t.Errorf("docs/README.md does not link docs/%s: add its capabilities", name)
		}
	}
}

var (
	// namedCommand is `driftless get syncs …` in a code span.
	namedCommand = regexp.MustCompile("`driftless ([a-z][a-z -]*[a-z])`")
	// namedField is `spec.source.git.verify` in a code span.
	namedField = regexp.MustCompile("`spec\\.([a-zA-Z.]+)`")
)

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// fieldExists reports whether path, JSON names, leads through t.
func fieldExists(t reflect.Type, path []string) bool {
	for _, name := range path {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		next, ok := field(t, name)
		if !ok {
			return false
		}
		t = next
	}
	return true
}

func field(t reflect.Type, name string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && jsonName(f) == "" {
			if ft, ok := field(f.Type, name); ok {
				return ft, true
			}
		}
		if jsonName(f) == name {
			return f.Type, true
		}
	}
	return nil, false
}
