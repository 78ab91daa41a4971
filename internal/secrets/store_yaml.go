package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/stores"
	"go.yaml.in/yaml/v3"
)

// yamlIndent is the indentation the sops CLI writes YAML with.
const yamlIndent = 4

// yamlStore reads a stream of YAML documents, each a mapping, into one
// branch per document, the comments yaml.v3 attaches to nodes as items of
// the tree, and writes the tree back with yaml.v3, indented by 4 as the
// sops CLI writes it. It is written against the tests that compare it
// with SOPS's YAML store (store_test.go): the same tree for every file,
// the same bytes for every tree.
func yamlStore() *fileStore {
	c := codec{read: readYAML, write: writeYAML}
	return &fileStore{name: "yaml", plain: c, encrypted: c,
		metadata: stores.MetadataOpts{Flatten: stores.MetadataFlattenNone},
		value: func(v any) ([]byte, error) {
			n, err := yamlNode(v)
			if err != nil {
				return nil, err
			}
			return yaml.Marshal(n)
		}}
}

// readYAML reads every document of a YAML stream as one branch. A
// document is a mapping, or empty. Comments are items of the tree
// (sops.Comment): they are not part of the MAC, but an encrypted comment
// decrypts only at the path it was encrypted at, so each goes where the
// sops CLI puts it. An error gives the line, never a value of the file.
func readYAML(in []byte) (sops.TreeBranches, error) {
	if len(in) == 0 {
		return nil, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(in))
	var branches sops.TreeBranches
	for n := 1; ; n++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		switch {
		case errors.Is(err, io.EOF) && n == 1:
			return nil, errors.New("the file holds no YAML document, only comments or blank lines")
		case errors.Is(err, io.EOF):
			return branches, nil
		case err != nil:
			return nil, fmt.Errorf("invalid YAML: %w", err)
		}
		branch, err := yamlDocument(&doc)
		var notMapping mappingError
		if n > 1 && errors.As(err, &notMapping) {
			err = stricterThanSOPS{err}
		}
		if err != nil {
			return nil, fmt.Errorf("YAML document %d: %w", n, err)
		}
		branches = append(branches, branch)
	}
}

// yamlDocument returns the branch of one document: its comments, then
// those of its mapping around the mapping's pairs.
func yamlDocument(doc *yaml.Node) (sops.TreeBranch, error) {
	top := doc.Content[0]
	switch {
	case top.Kind == yaml.SequenceNode:
		return nil, errors.New("a document that is a list is not supported: SOPS reads mappings")
	case top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null":
		// An empty document is an empty mapping, with the comments
		// above and on its null (not those below it, as the sops CLI).
		own := nodeCommentsOf(top, false)
		own.after = nil
		return yamlBranch(&yaml.Node{Kind: yaml.MappingNode}, commentsOf(doc).around(own))
	case top.Kind != yaml.MappingNode:
		return nil, errors.New("a document that is a single value is not supported: SOPS reads mappings")
	}
	if err := checkYAMLMapping(doc); err != nil {
		return nil, mappingError{err}
	}
	return yamlBranch(top, commentsOf(doc).around(commentsOf(top)))
}

// mappingError is checkYAMLMapping's refusal of a document.
type mappingError struct{ error }

func (e mappingError) Unwrap() error { return e.error }

// checkYAMLMapping decodes doc as a mapping of string keys, which is what
// yaml.v3 checks a document against for the sops CLI: each key once, a
// value its tag fits, a merge key (<<) that names mappings, aliases that
// do not multiply without bound. Its error names lines, not values.
func checkYAMLMapping(doc *yaml.Node) error {
	var m map[string]any
	err := doc.Decode(&m)
	var typeErr *yaml.TypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr):
		problems := make([]error, 0, len(typeErr.Errors))
		for _, e := range typeErr.Errors {
			problems = append(problems, yamlProblem(e))
		}
		return errors.Join(problems...)
	}
	if bad := scalarThatDoesNotDecode(doc); bad != nil {
		return fmt.Errorf("line %d: a value does not fit its tag %s", bad.Line, bad.ShortTag())
	}
	if strings.ContainsAny(err.Error(), "`'\"") || strings.Contains(err.Error(), "invalid map key") {
		return errors.New("the document cannot be read as a mapping of string keys")
	}
	return err
}

// scalarThatDoesNotDecode returns the first scalar under n that yaml.v3
// cannot decode (a value its tag does not fit: !!int abc, !!binary
// that is not base64), or nil. Aliases are not followed: their targets
// are under n too.
func scalarThatDoesNotDecode(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.ScalarNode {
		var v any
		if n.Decode(&v) != nil {
			return n
		}
	}
	for _, c := range n.Content {
		if bad := scalarThatDoesNotDecode(c); bad != nil {
			return bad
		}
	}
	return nil
}

// yamlProblem rewrites one of yaml.v3's "line N: …" type errors, which
// quote the value, as its line and what was wrong.
func yamlProblem(e string) error {
	line, msg, _ := strings.Cut(e, ":")
	if !strings.HasPrefix(line, "line ") {
		line = "a line"
	}
	switch {
	case strings.Contains(msg, "already defined at"):
		_, first, _ := strings.Cut(msg, "already defined at ")
		return fmt.Errorf("%s: a key is defined twice, first at %s", line, first)
	case strings.HasSuffix(msg, "into string"):
		return fmt.Errorf("%s: a key is not a string", line)
	}
	return fmt.Errorf("%s: a value does not fit its type or tag", line)
}

// nodeComments are the comment lines yaml.v3 attached to nodes, as the
// tree keeps them: those that go before the nodes' item (head comments,
// and line comments marked inline) and those that go after it (foot
// comments).
type nodeComments struct{ before, after []sops.Comment }

// commentsOf returns the comments of a value's node. The line comment of
// a scalar or alias stood after the value, and is inline; that of a
// mapping or list stood before its first line, as one of its own.
func commentsOf(n *yaml.Node) nodeComments { return nodeCommentsOf(n, leaf(n)) }

// keyCommentsOf returns the comments of a key's node: its line comment
// stood after the key, before the key's value, so the tree keeps it as a
// comment of its own line.
func keyCommentsOf(k *yaml.Node) nodeComments { return nodeCommentsOf(k, false) }

func nodeCommentsOf(n *yaml.Node, lineInline bool) nodeComments {
	var c nodeComments
	for _, line := range commentLines(n.HeadComment) {
		c.before = append(c.before, sops.Comment{Value: line})
	}
	for _, line := range commentLines(n.LineComment) {
		c.before = append(c.before, sops.Comment{Value: line, Inline: lineInline})
	}
	for _, line := range commentLines(n.FootComment) {
		c.after = append(c.after, sops.Comment{Value: line})
	}
	return c
}

// around returns c around inner: c's before first, c's after last. A
// key's comments are around its value's, a document's around its
// mapping's.
func (c nodeComments) around(inner nodeComments) nodeComments {
	return nodeComments{
		before: append(append([]sops.Comment(nil), c.before...), inner.before...),
		after:  append(append([]sops.Comment(nil), inner.after...), c.after...),
	}
}

// leaf reports whether the node's comments belong to the item it is the
// value of: a scalar, or an alias (whose target has comments of its
// own). A mapping or a list keeps its comments inside.
func leaf(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode || n.Kind == yaml.AliasNode
}

// yamlBranch returns the pairs of mapping m as a branch, within own: a
// pair's comments (its key's, and its value's when a leaf) around it.
func yamlBranch(m *yaml.Node, own nodeComments) (sops.TreeBranch, error) {
	branch := make(sops.TreeBranch, 0, len(m.Content)/2+len(own.before)+len(own.after))
	branch = appendCommentItems(branch, own.before)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key, err := yamlValue(k, nodeComments{})
		if err != nil {
			return nil, err
		}
		pair := keyCommentsOf(k)
		inner := nodeComments{}
		if leaf(v) {
			pair = pair.around(commentsOf(v))
		} else {
			inner = commentsOf(v)
		}
		value, err := yamlValue(v, inner)
		if err != nil {
			return nil, err
		}
		branch = appendCommentItems(branch, pair.before)
		branch = append(branch, sops.TreeItem{Key: key, Value: value})
		branch = appendCommentItems(branch, pair.after)
	}
	return appendCommentItems(branch, own.after), nil
}

// yamlList returns the items of sequence s as a list, within own: an
// item's comments around it, whatever its kind.
func yamlList(s *yaml.Node, own nodeComments) ([]any, error) {
	list := make([]any, 0, len(s.Content)+len(own.before)+len(own.after))
	list = appendCommentValues(list, own.before)
	for _, item := range s.Content {
		value, err := yamlValue(item, nodeComments{})
		if err != nil {
			return nil, err
		}
		c := commentsOf(item)
		list = appendCommentValues(list, c.before)
		list = append(list, value)
		list = appendCommentValues(list, c.after)
	}
	return appendCommentValues(list, own.after), nil
}

// yamlValue returns the tree value of n: a branch for a mapping, a list
// for a sequence, the target's value for an alias, and a scalar as
// yaml.v3 decodes it into an any (int, float64, bool, string, time.Time,
// nil). own are the comments that go inside a mapping or a list.
func yamlValue(n *yaml.Node, own nodeComments) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		return yamlBranch(n, own)
	case yaml.SequenceNode:
		return yamlList(n, own)
	case yaml.AliasNode:
		return yamlValue(n.Alias, commentsOf(n.Alias))
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: a value does not fit its tag %s", n.Line, n.ShortTag())
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: a YAML node of an unexpected kind", n.Line)
}

func appendCommentItems(branch sops.TreeBranch, comments []sops.Comment) sops.TreeBranch {
	for _, c := range comments {
		branch = append(branch, sops.TreeItem{Key: c})
	}
	return branch
}

func appendCommentValues(list []any, comments []sops.Comment) []any {
	for _, c := range comments {
		list = append(list, c)
	}
	return list
}

// writeYAML writes each branch as one document, indented as the sops CLI
// indents.
func writeYAML(branches sops.TreeBranches) ([]byte, error) {
	if len(branches) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(yamlIndent)
	for _, branch := range branches {
		m, err := yamlNode(branch)
		if err != nil {
			return nil, err
		}
		if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{m}}); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// yamlNode returns the node of a tree value: a mapping for a branch, a
// sequence for a list, else a scalar.
func yamlNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case sops.TreeBranch:
		return yamlMapping(v)
	case []any:
		return yamlSequence(v)
	}
	return yamlScalar(v)
}

// yamlScalar encodes a scalar as yaml.v3 does. A string yaml.v3 cannot
// encode (one that starts with a tab and ends with a newline: yaml.v3
// checks its own literal block, which does not read back) is written
// double-quoted; the sops CLI writes null in its place.
func yamlScalar(v any) (*yaml.Node, error) {
	var n yaml.Node
	err := n.Encode(v)
	if s, ok := v.(string); ok && err != nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}, nil
	}
	return &n, err
}

// commentQueue holds the comments of a branch or list met since its last
// value. The tree keeps a comment that stood after a value (inline)
// before the next one, so the writer puts inline comments on the next
// value, the others above it; what is left at the end goes below the
// last value.
type commentQueue struct{ above, inline []string }

func (q *commentQueue) push(c sops.Comment) {
	if c.Inline {
		q.inline = append(q.inline, "#"+c.Value)
	} else {
		q.above = append(q.above, "#"+c.Value)
	}
}

// place puts the queued comments on the next value: those above on head
// (the container itself for its first value), above what head holds
// already (a list item's own comments, written before the list's), and
// the inline ones on value's line.
func (q *commentQueue) place(head, value *yaml.Node) {
	if len(q.above) > 0 {
		head.HeadComment = strings.Join(append(q.above, lines(head.HeadComment)...), "\n")
	}
	if len(q.inline) > 0 {
		value.LineComment = strings.Join(q.inline, "\n")
	}
	*q = commentQueue{}
}

// lines returns a yaml.v3 comment's lines, none for "".
func lines(comment string) []string {
	if comment == "" {
		return nil
	}
	return strings.Split(comment, "\n")
}

// flush puts what is left below last, or above container when it holds
// no value.
func (q *commentQueue) flush(container, last *yaml.Node) {
	left := strings.Join(append(q.above, q.inline...), "\n")
	if left == "" {
		return
	}
	if last == nil {
		container.HeadComment = left
	} else {
		last.FootComment = left
	}
}

func yamlMapping(branch sops.TreeBranch) (*yaml.Node, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	var q commentQueue
	var last *yaml.Node
	for _, item := range branch {
		if c, ok := item.Key.(sops.Comment); ok {
			q.push(c)
			continue
		}
		k, err := yamlScalar(item.Key)
		if err != nil {
			return nil, err
		}
		v, err := yamlNode(item.Value)
		if err != nil {
			return nil, err
		}
		head := k
		if last == nil {
			head = m
		}
		q.place(head, v)
		m.Content = append(m.Content, k, v)
		last = k
	}
	q.flush(m, last)
	return m, nil
}

func yamlSequence(list []any) (*yaml.Node, error) {
	s := &yaml.Node{Kind: yaml.SequenceNode}
	var q commentQueue
	var last *yaml.Node
	for _, item := range list {
		if c, ok := item.(sops.Comment); ok {
			q.push(c)
			continue
		}
		v, err := yamlNode(item)
		if err != nil {
			return nil, err
		}
		head := v
		if last == nil {
			head = s
		}
		q.place(head, v)
		s.Content = append(s.Content, v)
		last = v
	}
	q.flush(s, last)
	return s, nil
}
