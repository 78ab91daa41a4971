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

func yamlStore() *fileStore {
	c := codec{read: readYAML, write: writeYAML}
	return &fileStore{name: "yaml", plain: c, encrypted: c,
		metadata: stores.MetadataOpts{Flatten: stores.MetadataFlattenNone},
		value: func(v any) ([]byte, error) {
			n, err := yamlValueNode(v)
			if err != nil {
				return nil, err
			}
			return yaml.Marshal(n)
		}}
}

// readYAML reads every document of a YAML stream as one branch. Each
// document is a mapping (or empty). Comments are items of the tree
// (sops.Comment), at the place the sops CLI puts them: they are not part
// of the MAC, but an encrypted comment decrypts only at the path it was
// encrypted at.
func readYAML(in []byte) (sops.TreeBranches, error) {
	// The sops CLI decodes the first document as a map first, which
	// refuses what a map cannot hold (a key twice, a key that is not a
	// string) and a file of only comments or blank lines; so does
	// driftless.
	if len(in) > 0 {
		if err := yaml.NewDecoder(bytes.NewReader(in)).Decode(map[string]any{}); err != nil {
			return nil, fmt.Errorf("invalid YAML: %w", err)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(in))
	var branches sops.TreeBranches
	for i := 1; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return branches, nil
		}
		if err != nil {
			return nil, fmt.Errorf("invalid YAML: %w", err)
		}
		branch, err := appendYAMLNode(sops.TreeBranch{}, &doc, true)
		if err != nil {
			return nil, fmt.Errorf("YAML document %d: %w", i, err)
		}
		branches = append(branches, branch)
	}
}

// appendYAMLNode appends the pairs of a document or mapping node to
// branch, with the node's own comments around them when withOwnComments
// (a list item's comments are the list's).
func appendYAMLNode(branch sops.TreeBranch, n *yaml.Node, withOwnComments bool) (sops.TreeBranch, error) {
	if withOwnComments {
		branch = appendBranchComments(branch, n.HeadComment, false)
		branch = appendBranchComments(branch, n.LineComment, false)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			var err error
			if branch, err = appendYAMLNode(branch, c, true); err != nil {
				return nil, err
			}
		}
	case yaml.MappingNode:
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			var key any
			if err := k.Decode(&key); err != nil {
				return nil, fmt.Errorf("line %d: %w", k.Line, err)
			}
			if s, ok := key.(string); ok {
				if seen[s] {
					return nil, fmt.Errorf("line %d: key %q is defined twice", k.Line, s)
				}
				seen[s] = true
			}
			branch = appendBranchComments(branch, k.HeadComment, false)
			branch = appendBranchComments(branch, k.LineComment, false)
			// A scalar's comments sit around its pair; a mapping's or a
			// list's inside it.
			scalar := v.Kind == yaml.ScalarNode || v.Kind == yaml.AliasNode
			if scalar {
				branch = appendBranchComments(branch, v.HeadComment, false)
				branch = appendBranchComments(branch, v.LineComment, true)
			}
			value, err := yamlTreeValue(v, !scalar)
			if err != nil {
				return nil, err
			}
			branch = append(branch, sops.TreeItem{Key: key, Value: value})
			if scalar {
				branch = appendBranchComments(branch, v.FootComment, false)
			}
			branch = appendBranchComments(branch, k.FootComment, false)
		}
	case yaml.ScalarNode:
		if n.ShortTag() != "!!null" {
			return nil, errors.New("a document that is a single value is not supported: SOPS reads mappings")
		}
		// An empty document: its foot comment is dropped, as the sops
		// CLI drops it.
		return branch, nil
	case yaml.SequenceNode:
		return nil, errors.New("a document that is a list is not supported: SOPS reads mappings")
	case yaml.AliasNode:
		var err error
		if branch, err = appendYAMLNode(branch, n.Alias, true); err != nil {
			return nil, err
		}
	}
	if withOwnComments {
		branch = appendBranchComments(branch, n.FootComment, false)
	}
	return branch, nil
}

// yamlTreeValue returns the tree value of a node: a TreeBranch for a
// mapping, []any for a list, and a scalar decoded as yaml.v3 decodes it
// into an any (int, float64, bool, string, nil).
func yamlTreeValue(n *yaml.Node, withOwnComments bool) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		return appendYAMLNode(sops.TreeBranch{}, n, withOwnComments)
	case yaml.SequenceNode:
		var list []any
		if withOwnComments {
			list = appendListComments(list, n.HeadComment, false)
			list = appendListComments(list, n.LineComment, false)
		}
		for _, item := range n.Content {
			list = appendListComments(list, item.HeadComment, false)
			list = appendListComments(list, item.LineComment, true)
			v, err := yamlTreeValue(item, false)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			list = appendListComments(list, item.FootComment, false)
		}
		if withOwnComments {
			list = appendListComments(list, n.FootComment, false)
		}
		return list, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	case yaml.AliasNode:
		return yamlTreeValue(n.Alias, true)
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

func appendBranchComments(branch sops.TreeBranch, comment string, inline bool) sops.TreeBranch {
	for _, line := range commentLines(comment) {
		branch = append(branch, sops.TreeItem{Key: sops.Comment{Value: line, Inline: inline}})
	}
	return branch
}

func appendListComments(list []any, comment string, inline bool) []any {
	for _, line := range commentLines(comment) {
		list = append(list, sops.Comment{Value: line, Inline: inline})
	}
	return list
}

// writeYAML writes each branch as one document, indented as the sops CLI
// indents, comments back where readYAML found them.
func writeYAML(branches sops.TreeBranches) ([]byte, error) {
	if len(branches) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(yamlIndent)
	for _, branch := range branches {
		m, err := yamlMappingNode(branch)
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

// pendingComments are the comments of the tree seen since its last value.
// A comment that stood on its own line goes above the next key or item;
// one that stood after a value (inline) after the next value, the tree
// keeping it before the value it followed. What is left after the last
// value goes below it.
type pendingComments struct{ above, inline []string }

func (p *pendingComments) add(c sops.Comment) {
	if c.Inline {
		p.inline = append(p.inline, c.Value)
	} else {
		p.above = append(p.above, c.Value)
	}
}

// attach puts the comments before the next value of container on it:
// those above on above (on the container itself for its first value),
// inline ones on value.
func (p *pendingComments) attach(container, above, value *yaml.Node) {
	if len(container.Content) == 0 {
		container.HeadComment = prependComment(p.above, container.HeadComment)
		p.above = nil
	}
	above.HeadComment = prependComment(p.above, above.HeadComment)
	value.LineComment = appendComment(value.LineComment, p.inline)
	*p = pendingComments{}
}

// finish puts the comments after the last value of container below last,
// or above the container when it holds no value.
func (p *pendingComments) finish(container, last *yaml.Node) {
	rest := append(p.above, p.inline...)
	if last == nil {
		container.HeadComment = prependComment(rest, container.HeadComment)
		return
	}
	last.FootComment = appendComment(last.FootComment, rest)
}

// prependComment returns the lines as a yaml.v3 comment (each line with
// its '#') above the comment there was.
func prependComment(lines []string, comment string) string {
	if len(lines) == 0 {
		return comment
	}
	c := "#" + strings.Join(lines, "\n#")
	if comment == "" {
		return c
	}
	return c + "\n" + comment
}

// appendComment returns the lines as a yaml.v3 comment below the comment
// there was.
func appendComment(comment string, lines []string) string {
	if len(lines) == 0 {
		return comment
	}
	c := "#" + strings.Join(lines, "\n#")
	if comment == "" {
		return c
	}
	return comment + "\n" + c
}

// yamlValueNode returns the node of a tree value: a mapping for a
// TreeBranch, a list for []any, else a scalar encoded by yaml.v3.
func yamlValueNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case sops.TreeBranch:
		return yamlMappingNode(v)
	case []any:
		return yamlListNode(v)
	}
	return yamlScalarNode(v)
}

// yamlScalarNode encodes a scalar as yaml.v3 does. yaml.v3 cannot encode
// some strings (one that starts with a tab and ends with a newline: its
// literal block does not parse back); the sops CLI then writes null in
// its place, driftless the string double-quoted.
func yamlScalarNode(v any) (*yaml.Node, error) {
	n := &yaml.Node{}
	err := n.Encode(v)
	if s, ok := v.(string); ok && err != nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}, nil
	}
	return n, err
}

func yamlMappingNode(branch sops.TreeBranch) (*yaml.Node, error) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	var p pendingComments
	var lastKey *yaml.Node
	for _, item := range branch {
		if c, ok := item.Key.(sops.Comment); ok {
			p.add(c)
			continue
		}
		k, err := yamlScalarNode(item.Key)
		if err != nil {
			return nil, err
		}
		v, err := yamlValueNode(item.Value)
		if err != nil {
			return nil, err
		}
		p.attach(m, k, v)
		m.Content = append(m.Content, k, v)
		lastKey = k
	}
	p.finish(m, lastKey)
	return m, nil
}

func yamlListNode(list []any) (*yaml.Node, error) {
	l := &yaml.Node{Kind: yaml.SequenceNode}
	var p pendingComments
	var last *yaml.Node
	for _, item := range list {
		if c, ok := item.(sops.Comment); ok {
			p.add(c)
			continue
		}
		n, err := yamlValueNode(item)
		if err != nil {
			return nil, err
		}
		p.attach(l, n, n)
		l.Content = append(l.Content, n)
		last = n
	}
	p.finish(l, last)
	return l, nil
}
