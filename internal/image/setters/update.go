package setters

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Latest is what a policy selected.
type Latest struct {
	// Image is the repository, e.g. registry.example.com/app.
	Image  string
	Tag    string
	Digest string
}

// Lookup tells the rewriter what each policy selected.
type Lookup interface {
	// Policy returns the selection of the ImagePolicy namespace/name; an
	// error wrapping ErrNoPolicy when it does not exist, another error
	// when it selected nothing yet.
	Policy(namespace, name string) (Latest, error)
	// Implied returns the selection of a policy a Flux v1 annotation
	// implies (see Implied).
	Implied(p Implied) (Latest, error)
}

// Implied is a policy a Flux v1 annotation implies for one container.
type Implied struct {
	// Name says where it comes from: "flux-v1:Deployment/web:app".
	Name string
	Spec v1alpha1.ImagePolicySpec
}

// Problem is a marker that could not be applied; its file is not
// changed.
type Problem struct {
	File    string
	Line    int
	Message string
	// Waiting: the marker's policy has not scanned yet (ErrNotScanned);
	// the marker is applied once it has.
	Waiting bool
}

func (p Problem) Error() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message) }

// Result is what Update changed and what it could not.
type Result struct {
	Changes  []v1alpha1.ImageChange
	Problems []Problem
	// Files are the files rewritten, relative to the root.
	Files []string
}

// Options of Update.
type Options struct {
	// Root is the checkout; Paths, relative to it, are the directories
	// (or files) to look in; none means the whole checkout.
	Root  string
	Paths []string
	// DryRun computes the changes without writing.
	DryRun bool
}

// Update rewrites every marker under opts.Paths to what lookup says. A
// file with any problem is left as it was; the other files are written.
// The error is for what stops the whole walk (an unreadable directory).
func Update(opts Options, lookup Lookup) (Result, error) {
	files, err := yamlFiles(opts.Root, opts.Paths)
	if err != nil {
		return Result{}, err
	}
	var res Result
	for _, rel := range files {
		path := filepath.Join(opts.Root, rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return res, fmt.Errorf("read %s: %w", rel, err)
		}
		out, changes, problems := UpdateFile(rel, data, lookup)
		if len(problems) > 0 {
			res.Problems = append(res.Problems, problems...)
			continue
		}
		if len(changes) == 0 {
			continue
		}
		res.Changes = append(res.Changes, changes...)
		res.Files = append(res.Files, rel)
		if opts.DryRun {
			continue
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return res, fmt.Errorf("write %s: %w", rel, err)
		}
	}
	return res, nil
}

// yamlFiles lists the .yaml and .yml files under paths, relative to root,
// sorted; symbolic links and .git are skipped.
func yamlFiles(root string, paths []string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	seen := map[string]bool{}
	var files []string
	for _, p := range paths {
		p = filepath.Clean(strings.TrimPrefix(p, "/"))
		if !filepath.IsLocal(p) && p != "." {
			return nil, fmt.Errorf("path %q leaves the repository", p)
		}
		err := filepath.WalkDir(filepath.Join(root, p), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			if d.Type()&fs.ModeSymlink != 0 || !d.Type().IsRegular() {
				return nil
			}
			if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			if !seen[rel] {
				seen[rel] = true
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", p, err)
		}
	}
	sort.Strings(files)
	return files, nil
}

// edit replaces the scalar at line:column (1-based) with value.
type edit struct {
	line, column int
	node         *yaml.Node
	value        string
}

// UpdateFile rewrites the markers of one file's content. It returns the
// new content, the changes, and the problems; with problems the content
// returned is the input, unchanged.
func UpdateFile(file string, data []byte, lookup Lookup) ([]byte, []v1alpha1.ImageChange, []Problem) {
	docs, err := decodeAll(data)
	if err != nil {
		return data, nil, []Problem{{File: file, Line: yamlErrorLine(err), Message: "not valid YAML: " + err.Error()}}
	}
	var (
		edits    []edit
		changes  []v1alpha1.ImageChange
		problems []Problem
	)
	marked := map[*yaml.Node]bool{}
	for _, doc := range docs {
		walk(doc, func(n *yaml.Node) {
			if n.Kind != yaml.ScalarNode || n.LineComment == "" {
				return
			}
			m, ok, err := ParseMarker(n.LineComment)
			if !ok {
				return
			}
			marked[n] = true
			if err != nil {
				problems = append(problems, Problem{File: file, Line: n.Line, Message: err.Error()})
				return
			}
			latest, err := lookup.Policy(m.Namespace, m.Name)
			if err != nil {
				msg := fmt.Sprintf("ImagePolicy %s: %v", m.Policy(), err)
				if errors.Is(err, ErrNoPolicy) {
					msg = fmt.Sprintf("the marker names ImagePolicy %s, which does not exist; create it or fix the marker", m.Policy())
				}
				problems = append(problems, Problem{File: file, Line: n.Line, Message: msg, Waiting: errors.Is(err, ErrNotScanned)})
				return
			}
			value, err := setField(n.Value, m.Field, latest)
			if err != nil {
				problems = append(problems, Problem{File: file, Line: n.Line, Message: fmt.Sprintf("ImagePolicy %s: %v", m.Policy(), err)})
				return
			}
			if value != n.Value {
				edits = append(edits, edit{line: n.Line, column: n.Column, node: n, value: value})
				changes = append(changes, v1alpha1.ImageChange{File: file, Line: n.Line, Image: latest.Image, Old: n.Value, New: value, Policy: m.Policy()})
			}
		})
	}
	for _, doc := range docs {
		e, c, p := fluxV1(file, doc, marked, lookup)
		edits, changes, problems = append(edits, e...), append(changes, c...), append(problems, p...)
	}
	if len(problems) > 0 {
		return data, nil, problems
	}
	if len(edits) == 0 {
		return data, nil, nil
	}
	out, err := splice(data, edits)
	if err != nil {
		return data, nil, []Problem{{File: file, Line: edits[0].line, Message: err.Error()}}
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Line < changes[j].Line })
	return out, changes, nil
}

// setField returns old with the field of the marker set from latest.
func setField(old string, f Field, latest Latest) (string, error) {
	switch f {
	case FieldTag:
		if latest.Tag == "" {
			return "", errors.New("has selected no tag yet")
		}
		return latest.Tag, nil
	case FieldName:
		return latest.Image, nil
	case FieldDigest:
		if latest.Digest == "" {
			return "", errors.New("has no digest yet")
		}
		return latest.Digest, nil
	}
	if latest.Tag == "" {
		return "", errors.New("has selected no tag yet")
	}
	v := latest.Image + ":" + latest.Tag
	if ParseRef(old).Digest != "" && latest.Digest != "" {
		v += "@" + latest.Digest
	}
	return v, nil
}

func decodeAll(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &n)
	}
}

func walk(n *yaml.Node, f func(*yaml.Node)) {
	f(n)
	for _, c := range n.Content {
		walk(c, f)
	}
}

// yamlErrorLine reads the line number from a yaml.v3 error ("yaml: line
// 3: …"), 0 when it has none.
func yamlErrorLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr != nil {
		return 0
	}
	return line
}

// splice replaces each edited scalar's bytes in data, keeping its quoting.
func splice(data []byte, edits []edit) ([]byte, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Later columns first, so earlier offsets on a line stay valid.
	sort.SliceStable(edits, func(i, j int) bool {
		if edits[i].line != edits[j].line {
			return edits[i].line < edits[j].line
		}
		return edits[i].column > edits[j].column
	})
	for _, e := range edits {
		if e.line < 1 || e.line > len(lines) {
			return nil, fmt.Errorf("line %d is outside the file", e.line)
		}
		line := []rune(string(lines[e.line-1]))
		start := e.column - 1
		if start < 0 || start >= len(line) {
			return nil, fmt.Errorf("column %d is outside line %d", e.column, e.line)
		}
		end, quoted, err := scalarEnd(line, start, e.node)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", e.line, err)
		}
		value := e.value
		if quoted != 0 {
			value = string(quoted) + value + string(quoted)
		}
		lines[e.line-1] = []byte(string(line[:start]) + value + string(line[end:]))
	}
	return bytes.Join(lines, nil), nil
}

// scalarEnd finds where the scalar that starts at line[start] ends, and
// its quote character (0 for plain). It refuses what it cannot edit
// without changing more than the value (escapes, multi-line scalars).
func scalarEnd(line []rune, start int, n *yaml.Node) (int, rune, error) {
	switch n.Style {
	case 0:
		end := start + len([]rune(n.Value))
		if end > len(line) || string(line[start:end]) != n.Value {
			return 0, 0, errors.New("the marked value spans lines or is written in a form that cannot be edited in place; write it as a plain or quoted scalar on one line")
		}
		return end, 0, nil
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		q := '"'
		if n.Style == yaml.SingleQuotedStyle {
			q = '\''
		}
		end := start + 1 + len([]rune(n.Value))
		if line[start] != q || end >= len(line) || string(line[start+1:end]) != n.Value || line[end] != q {
			return 0, 0, errors.New("the marked value has escapes or spans lines; write it on one line without escapes")
		}
		return end + 1, q, nil
	}
	return 0, 0, errors.New("the marked value is a block scalar; write it as a plain or quoted scalar on one line")
}
