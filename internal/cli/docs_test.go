package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The flag tables in docs/*.md and README.md are generated from the
// commands. Each table sits between two markers:
//
//	<!-- flags: driftless agent -->
//	| flag | default | meaning |
//	…
//	<!-- end flags -->
//
// and lists every flag of that command in the order the command defines
// them, with its default and its usage string. `go test ./internal/cli
// -run TestDocs -update` rewrites the tables.
var updateDocs = flag.Bool("update", false, "rewrite the flag tables in docs/*.md and README.md from the commands")

const (
	flagsMarkerEnd = "<!-- end flags -->"
	updateHint     = "run `go test ./internal/cli -run TestDocs -update` to regenerate the table from the command; change defaults and wording in the flag's definition in internal/cli, not in the doc"
)

var flagsMarker = regexp.MustCompile(`<!-- flags: ([a-z -]+?) -->\n`)

func TestDocsFlagTablesMatchTheCommands(t *testing.T) {
	commands := documentedCommands(t)
	tabled := map[string]bool{}
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		var out strings.Builder
		rest := text
		for {
			m := flagsMarker.FindStringSubmatchIndex(rest)
			if m == nil {
				out.WriteString(rest)
				break
			}
			path := rest[m[2]:m[3]]
			body := rest[m[1]:]
			end := strings.Index(body, flagsMarkerEnd)
			if end < 0 {
				t.Fatalf("%s: %q has no %q after it", file, strings.TrimSpace(rest[m[0]:m[1]]), flagsMarkerEnd)
			}
			out.WriteString(rest[:m[1]])
			cmd, ok := commands[path]
			if !ok {
				t.Errorf("%s: a flag table for %q, which is not a command; commands with flags: %s", file, path, strings.Join(sortedKeys(commands), ", "))
				out.WriteString(body[:end])
			} else {
				tabled[path] = true
				want := flagTable(cmd)
				if got := body[:end]; got != want && !*updateDocs {
					t.Errorf("%s: the flag table of `%s` differs from the command:\n  %s\n%s", file, path,
						strings.Join(tableDifferences(got, want), "\n  "), updateHint)
				}
				out.WriteString(want)
			}
			rest = body[end:]
		}
		if *updateDocs && out.String() != text {
			if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the flag tables of %s", file)
		}
	}
	for _, path := range sortedKeys(commands) {
		if !tabled[path] {
			t.Errorf("`%s` has flags but no flag table in docs/*.md or README.md: add the lines %q and %q where the command is described, then %s",
				path, "<!-- flags: "+path+" -->", flagsMarkerEnd, updateHint)
		}
	}
}

// proseDefault is how docs name a default outside the tables:
// "`--full-resync-interval` (default `1h`)".
var proseDefault = regexp.MustCompile("`(--[a-z0-9-]+)` \\(default `([^`]*)`[,)]")

func TestDocsStateTheFlagDefaultsTheCommandsHave(t *testing.T) {
	byName := map[string][]*pflag.Flag{}
	for _, cmd := range documentedCommands(t) {
		commandFlags(cmd, func(f *pflag.Flag) { byName["--"+f.Name] = append(byName["--"+f.Name], f) })
	}
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, m := range proseDefault.FindAllStringSubmatchIndex(text, -1) {
			name, value := text[m[2]:m[3]], text[m[4]:m[5]]
			flags := byName[name]
			if len(flags) == 0 {
				continue // another tool's flag, such as Flux v1's
			}
			ok := false
			var code []string
			for _, f := range flags {
				ok = ok || sameDefault(value, f.DefValue)
				code = append(code, "`"+f.DefValue+"`")
			}
			if !ok {
				line := strings.Count(text[:m[0]], "\n") + 1
				t.Errorf("%s:%d: says %s defaults to `%s`, but the code's default is %s: fix the doc (or the flag's default in internal/cli)",
					file, line, name, value, strings.Join(code, " or "))
			}
		}
	}
}

// sameDefault reports whether a documented default means the flag's
// default value; durations may be written short ("1h" for "1h0m0s").
func sameDefault(doc, code string) bool {
	if doc == code {
		return true
	}
	d1, err1 := time.ParseDuration(doc)
	d2, err2 := time.ParseDuration(code)
	return err1 == nil && err2 == nil && d1 == d2
}

// documentedCommands returns every command with flags, by command path.
// Defaults read from the environment are shown as the variable: the
// environment is set to the variables' own names while the commands are
// built.
func documentedCommands(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	t.Setenv("TMPDIR", "$TMPDIR")
	t.Setenv("KUBECONFIG", "$KUBECONFIG")
	out := map[string]*cobra.Command{}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		n := 0
		commandFlags(cmd, func(*pflag.Flag) { n++ })
		if n > 0 && !cmd.Hidden {
			out[cmd.CommandPath()] = cmd
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand(io.Discard, io.Discard))
	return out
}

// commandFlags calls fn for each flag of cmd a user can set, in the
// order the command defines them.
func commandFlags(cmd *cobra.Command, fn func(*pflag.Flag)) {
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" || f.Name == "help" {
			return
		}
		fn(f)
	})
}

// flagTable is the Markdown table of cmd's flags, as docs hold it.
func flagTable(cmd *cobra.Command) string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n| --- | --- | --- |\n")
	commandFlags(cmd, func(f *pflag.Flag) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", flagNames(f), tableDefault(f), cell(f.Usage))
	})
	return b.String()
}

func flagNames(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "`-" + f.Shorthand + "`, `--" + f.Name + "`"
	}
	return "`--" + f.Name + "`"
}

func tableDefault(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "[]":
		return "—"
	}
	return "`" + f.DefValue + "`"
}

func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// tableDifferences says, flag by flag, how the table got differs from
// the generated table want.
func tableDifferences(got, want string) []string {
	type row struct{ def, meaning string }
	parse := func(table string) (map[string]row, []string) {
		rows := map[string]row{}
		var order []string
		for _, line := range strings.Split(table, "\n") {
			cells := splitRow(line)
			if len(cells) < 3 || !strings.Contains(cells[0], "`--") {
				continue
			}
			name := cells[0][strings.Index(cells[0], "`--")+1:]
			name = name[:strings.IndexByte(name[1:], '`')+1]
			rows[name] = row{def: cells[1], meaning: cells[2]}
			order = append(order, name)
		}
		return rows, order
	}
	g, gotOrder := parse(got)
	w, wantOrder := parse(want)
	var diffs []string
	for _, name := range wantOrder {
		gr, ok := g[name]
		wr := w[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s is not documented (default %s: %s)", name, wr.def, wr.meaning))
		case gr.def != wr.def:
			diffs = append(diffs, fmt.Sprintf("%s: the table says default %s, the code's default is %s", name, gr.def, wr.def))
		case gr.meaning != wr.meaning:
			diffs = append(diffs, fmt.Sprintf("%s: the table says %q, the flag's usage is %q", name, gr.meaning, wr.meaning))
		}
	}
	for _, name := range gotOrder {
		if _, ok := w[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s is documented, but the command has no such flag", name))
		}
	}
	if len(diffs) == 0 {
		diffs = append(diffs, "the rows or their layout differ from the command's flags, in the order it defines them")
	}
	return diffs
}

// splitRow splits a Markdown table row into its trimmed cells, keeping
// escaped pipes inside a cell.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	var cells []string
	var cur strings.Builder
	for i := 1; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteString(`\|`)
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return cells
}

// docFiles returns README.md and docs/*.md of the repository.
func docFiles(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
