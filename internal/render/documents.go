package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml3 "go.yaml.in/yaml/v3"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// A document is one YAML document of a file.
type document struct {
	data  []byte
	index int // 0-based; counts empty documents too
	line  int // 1-based line of data's first byte
}

// splitYAML splits a file into its documents and numbers them the way YAML
// does, which is also the way a person counts them: every "---" line starts
// a document, even one that turns out empty, while the text before the
// first "---", or after a "..." end marker, is a document only if it holds
// more than blank lines, comments and directives. So a file that starts with
// "---" starts with document 0. It returns at most limit+1 documents.
func splitYAML(data []byte, limit int) []document {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	var docs []document
	start, startLine, explicit := 0, 1, false
	end := func(at int) {
		if d := data[start:at]; explicit || hasContent(d) {
			docs = append(docs, document{data: d, index: len(docs), line: startLine})
		}
	}
	line := 1
	for off := 0; off < len(data); line++ {
		next := len(data)
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			next = off + i + 1
		}
		marker, inline := documentMarker(data[off:next])
		switch {
		case marker == "---" && inline:
			// "--- {a: 1}": the document starts on the marker line, which
			// the YAML parser reads fine.
			end(off)
			start, startLine, explicit = off, line, true
		case marker == "---":
			end(off)
			start, startLine, explicit = next, line+1, true
		case marker == "...":
			end(off)
			start, startLine, explicit = next, line+1, false
		}
		off = next
		if len(docs) > limit {
			return docs
		}
	}
	end(len(data))
	return docs
}

// documentMarker returns "---" or "..." if line is a document marker, and
// whether content follows the marker on the same line.
func documentMarker(line []byte) (marker string, inline bool) {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) < 3 {
		return "", false
	}
	marker = string(line[:3])
	if marker != "---" && marker != "..." {
		return "", false
	}
	rest := line[3:]
	if len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // "---foo" is a plain scalar
	}
	rest = bytes.TrimLeft(rest, " \t")
	inline = len(rest) > 0 && rest[0] != '#'
	if marker == "..." && inline {
		return "", false // not valid YAML; let the parser say so
	}
	return marker, inline
}

// hasContent reports whether data holds more than blank lines, comments
// and directives.
func hasContent(data []byte) bool {
	for line := range bytes.Lines(data) {
		line = bytes.TrimLeft(line, " \t\r\n")
		if len(line) > 0 && line[0] != '#' && line[0] != '%' {
			return true
		}
	}
	return false
}

// decodeYAML parses one YAML document, and returns it decoded and as the
// JSON it was decoded from. It returns nil for a document that is empty
// or only comments. Line numbers in its errors count from the start of
// the file.
func decodeYAML(doc document) (any, []byte, error) {
	// Strict: a key set twice in one mapping is an error, not a silent
	// choice of one of the values.
	j, err := yaml.YAMLToJSONStrict(doc.data)
	if err != nil {
		return nil, nil, yamlError(doc, err)
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, nil, fmt.Errorf("invalid YAML: %w", err)
	}
	return v, j, nil
}

// yamlError turns an error of the YAML parser about doc into one that
// counts lines from the start of the file.
func yamlError(doc document, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, ":\n  ", ": ")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	return fmt.Errorf("invalid YAML: %s", shiftLines(msg, doc.line-1))
}

var lineNumber = regexp.MustCompile(`\bline (\d+)`)

// shiftLines adds offset to every "line N" in msg.
func shiftLines(msg string, offset int) string {
	return lineNumber.ReplaceAllStringFunc(msg, func(s string) string {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "line "))
		if err != nil {
			return s
		}
		return "line " + strconv.Itoa(n+offset)
	})
}

// decodeJSON parses a JSON file, which holds a single value. It returns nil
// for a file that holds nothing. As YAML is, it is parsed strictly: a key
// set twice in one object is an error.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return nil, fmt.Errorf("invalid JSON at line %d: %w", lineAt(data, syntax.Offset), err)
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("invalid JSON at line %d: content after the first value; a .json file holds one object or a List", lineAt(data, dec.InputOffset()))
	}
	if err := duplicateKey(data); err != nil {
		return nil, err
	}
	if err := utiljson.ConvertInterfaceNumbers(&v, 0); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return v, nil
}

// lineAt returns the 1-based line of data's byte offset.
func lineAt(data []byte, offset int64) int {
	offset = min(max(offset, 0), int64(len(data)))
	return 1 + bytes.Count(data[:offset], []byte("\n"))
}

// invalidUTF8 returns the 1-based line of the first byte of data that is
// not UTF-8, or 0 if data is valid UTF-8.
func invalidUTF8(data []byte) int {
	if utf8.Valid(data) {
		return 0
	}
	for off := 0; off < len(data); {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			return lineAt(data, int64(off))
		}
		off += n
	}
	return 0
}

// duplicateKey returns an error naming the first key of data, a valid JSON
// value, that is set twice in one object, or nil.
func duplicateKey(data []byte) error {
	type object struct {
		keys   map[string]bool
		keyNow bool // the next token is a key
	}
	var stack []*object // nil entries are arrays
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF; decodeJSON reports syntax errors
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.keyNow {
			if top.keys[key] {
				return fmt.Errorf("invalid JSON at line %d: key %q is set twice in one object; remove one", lineAt(data, dec.InputOffset()), key)
			}
			top.keys[key] = true
			top.keyNow = false
			continue
		}
		if top != nil {
			top.keyNow = true // a value of top starts or ends here
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{keys: map[string]bool{}, keyNow: true})
		case json.Delim('['):
			stack = append(stack, nil)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// decodedSize is the size of a decoded document that Budgets.MaxBytes
// bounds: the length of every key and string, and one for every other
// value.
func decodedSize(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(1)
		for k, e := range v {
			n += int64(max(1, len(k))) + decodedSize(e)
		}
		return n
	case []any:
		n := int64(1)
		for _, e := range v {
			n += decodedSize(e)
		}
		return n
	case string:
		return int64(max(1, len(v)))
	}
	return 1
}

// mayAlias reports whether a YAML document may hold an alias, which needs
// an anchor ("&a") and an alias ("*a").
func mayAlias(data []byte) bool {
	return bytes.IndexByte(data, '&') >= 0 && bytes.IndexByte(data, '*') >= 0
}

// expandedSize returns about how large doc's value becomes once its aliases
// are expanded, without expanding them: an upper bound of decodedSize, and
// of the JSON the YAML decoder makes on the way, or any number above limit
// if that is more than limit.
func expandedSize(doc document, limit int64) (int64, error) {
	var root yaml3.Node
	if err := yaml3.Unmarshal(doc.data, &root); err != nil {
		return 0, yamlError(doc, err)
	}
	s := sizer{limit: limit, sizes: map[*yaml3.Node]int64{}, open: map[*yaml3.Node]bool{}}
	return s.size(&root), nil
}

// sizer measures YAML nodes, counting an alias as the node it repeats and
// each node once.
type sizer struct {
	limit int64
	sizes map[*yaml3.Node]int64
	open  map[*yaml3.Node]bool // nodes being measured
}

func (s *sizer) size(n *yaml3.Node) int64 {
	if size, ok := s.sizes[n]; ok {
		return size
	}
	if s.open[n] {
		return 1 // an alias inside its own anchor, which the decoder refuses
	}
	s.open[n] = true
	size := int64(1)
	switch n.Kind {
	case yaml3.ScalarNode:
		size = jsonSize(n)
	case yaml3.AliasNode:
		if n.Alias != nil {
			size = s.size(n.Alias)
		}
	default:
		for _, c := range n.Content {
			// Sizes stay at most limit+1, so the sum cannot overflow.
			if size = min(size+s.size(c), s.limit+1); size > s.limit {
				break
			}
		}
	}
	delete(s.open, n)
	s.sizes[n] = size
	return size
}

// jsonSize is at least the length of scalar n as a JSON string: JSON
// escapes "<", ">" and "&" in six bytes, as it does control characters and
// bytes that are not UTF-8, which a !!binary value may hold.
func jsonSize(n *yaml3.Node) int64 {
	if n.Tag == "!!binary" {
		return 6 * int64(len(n.Value))
	}
	size := int64(2)
	for i := 0; i < len(n.Value); i++ {
		switch c := n.Value[i]; {
		case c < 0x20, c == '<', c == '>', c == '&', c == 0xe2: // 0xe2 starts U+2028 and U+2029
			size += 6
		case c == '"', c == '\\':
			size += 2
		default:
			size++
		}
	}
	return size
}
