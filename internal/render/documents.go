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
// "---" starts with document 0.
func splitYAML(data []byte) []document {
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

// decodeYAML parses one YAML document. It returns nil for a document that
// is empty or only comments. Line numbers in its errors count from the
// start of the file.
func decodeYAML(doc document) (any, error) {
	// Strict: a key set twice in one mapping is an error, not a silent
	// choice of one of the values.
	j, err := yaml.YAMLToJSONStrict(doc.data)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.ReplaceAll(msg, ":\n  ", ": ")
		msg = strings.ReplaceAll(msg, "\n  ", "; ")
		return nil, fmt.Errorf("invalid YAML: %s", shiftLines(msg, doc.line-1))
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	return v, nil
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
// for a file that holds nothing.
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
