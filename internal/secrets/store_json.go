package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/stores"
)

func jsonStore() *fileStore {
	c := codec{read: readJSON, write: writeJSON}
	return &fileStore{name: "json", plain: c, encrypted: c,
		metadata: stores.MetadataOpts{Flatten: stores.MetadataFlattenNone},
		value: func(v any) ([]byte, error) {
			out, err := appendJSON(nil, v)
			if err != nil {
				return nil, err
			}
			return indentJSON(out)
		}}
}

// binaryKey is the key of the JSON document SOPS keeps a whole file in.
const binaryKey = "data"

// binaryStore keeps any file as one string, the value of "data" in a JSON
// document: that is how the sops CLI encrypts a file that is neither
// YAML, JSON, dotenv nor INI.
func binaryStore() *fileStore {
	s := jsonStore()
	s.name = "binary"
	s.plain = codec{
		read: func(in []byte) (sops.TreeBranches, error) {
			return sops.TreeBranches{{{Key: binaryKey, Value: string(in)}}}, nil
		},
		write: func(branches sops.TreeBranches) ([]byte, error) {
			if len(branches) != 1 {
				return nil, errOneBranch
			}
			for _, item := range branches[0] {
				if item.Key != binaryKey {
					continue
				}
				if s, ok := item.Value.(string); ok {
					return []byte(s), nil
				}
				return nil, fmt.Errorf("the file's %q is not a string", binaryKey)
			}
			return nil, fmt.Errorf("the file has no %q", binaryKey)
		},
	}
	s.value = func(any) ([]byte, error) {
		return nil, errors.New("a binary file has no values to extract")
	}
	return s
}

// readJSON reads a JSON object, keys in the file's order (duplicates
// kept), integers that fit 64 bits as int and other numbers as float64,
// as the sops CLI reads them.
func readJSON(in []byte) (sops.TreeBranches, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if tok != json.Delim('{') {
		return nil, errors.New("SOPS reads JSON files that hold one object ({…}); wrap other values in one, e.g. {\"data\": …}")
	}
	branch, err := readJSONObject(dec)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: line %d: %w", lineAt(in, dec.InputOffset()), err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, stricterThanSOPS{errors.New("invalid JSON: more than one value: SOPS reads one object")}
	}
	return sops.TreeBranches{branch}, nil
}

// readJSONObject reads the rest of an object whose '{' dec has read.
func readJSONObject(dec *json.Decoder) (sops.TreeBranch, error) {
	branch := sops.TreeBranch{}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		value, err := readJSONValue(dec)
		if err != nil {
			return nil, err
		}
		branch = append(branch, sops.TreeItem{Key: key, Value: value})
	}
	_, err := dec.Token() // '}'
	return branch, err
}

func readJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			return readJSONObject(dec)
		}
		list := []any{}
		for dec.More() {
			v, err := readJSONValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ']'
		return list, err
	case json.Number:
		if i, err := tok.Int64(); err == nil {
			return int(i), nil
		}
		f, err := tok.Float64()
		if err != nil {
			// strconv's error quotes the number.
			return nil, errors.New("a number beyond the range of a 64-bit float")
		}
		return f, nil
	}
	return tok, nil
}

// lineAt returns the number of the line of in that offset is on.
func lineAt(in []byte, offset int64) int {
	return bytes.Count(in[:min(offset, int64(len(in)))], []byte("\n")) + 1
}

// writeJSON writes the one branch of a JSON file, indented with tabs as
// the sops CLI writes it; comments are not written (JSON has none).
func writeJSON(branches sops.TreeBranches) ([]byte, error) {
	if len(branches) != 1 {
		return nil, errOneBranch
	}
	out, err := appendJSON(nil, branches[0])
	if err != nil {
		return nil, err
	}
	out, err = indentJSON(out)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func appendJSON(out []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case sops.TreeBranch:
		out = append(out, '{')
		first := true
		for _, item := range v {
			if _, ok := item.Key.(sops.Comment); ok {
				continue
			}
			key, err := stringKey(item)
			if err != nil {
				return nil, err
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			if out, err = appendJSON(out, key); err != nil {
				return nil, err
			}
			out = append(out, ':')
			if out, err = appendJSON(out, item.Value); err != nil {
				return nil, err
			}
		}
		return append(out, '}'), nil
	case []any:
		out = append(out, '[')
		first := true
		for _, item := range v {
			if _, ok := item.(sops.Comment); ok {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			var err error
			if out, err = appendJSON(out, item); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(out, b...), nil
}

func indentJSON(compact []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", "\t"); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
