package secrets

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/stores"
)

// dotenvStore reads and writes KEY=VALUE lines as the sops CLI does: no
// quoting (a quote is part of the value), no trimming, a literal \n in a
// value is a newline, a line that starts with # is a comment, empty lines
// are dropped; the metadata is kept in sops_-prefixed keys. It is written
// against the tests that compare it with SOPS's dotenv store
// (store_test.go): the same tree for every file, the same bytes for every
// tree.
func dotenvStore() *fileStore {
	c := codec{read: readDotenv, write: writeDotenv}
	return &fileStore{name: "dotenv", plain: c, encrypted: c,
		metadata: stores.MetadataOpts{Flatten: stores.MetadataFlattenFull},
		value: func(v any) ([]byte, error) {
			if s, ok := v.(string); ok {
				return []byte(s), nil
			}
			return nil, fmt.Errorf("a dotenv value is a string, not %T", v)
		}}
}

// readDotenv reads the file as one branch, a line at a time. A line
// that is neither empty, a comment nor KEY=VALUE is an error naming the
// line's number, not its text.
func readDotenv(in []byte) (sops.TreeBranches, error) {
	branch := sops.TreeBranch{}
	for i, line := range strings.Split(string(in), "\n") {
		if line == "" {
			continue
		}
		item, ok := dotenvItem(line)
		if !ok {
			return nil, fmt.Errorf("line %d is neither KEY=VALUE nor a # comment", i+1)
		}
		branch = append(branch, item)
	}
	return sops.TreeBranches{branch}, nil
}

// dotenvItem returns the tree item of a line that is not empty: a
// comment (the text after its #), or a key (up to the first =) and its
// value (the rest, \n a newline).
func dotenvItem(line string) (sops.TreeItem, bool) {
	if text, ok := strings.CutPrefix(line, "#"); ok {
		return sops.TreeItem{Key: sops.Comment{Value: text}}, true
	}
	key, value, ok := strings.Cut(line, "=")
	return sops.TreeItem{Key: key, Value: strings.ReplaceAll(value, `\n`, "\n")}, ok
}

// writeDotenv writes each item of the one branch as a line: a comment
// after a #, a value with its newlines as \n.
func writeDotenv(branches sops.TreeBranches) ([]byte, error) {
	if len(branches) != 1 {
		return nil, errOneBranch
	}
	var b bytes.Buffer
	for _, item := range branches[0] {
		if c, ok := item.Key.(sops.Comment); ok {
			fmt.Fprintf(&b, "#%s\n", c.Value)
			continue
		}
		switch item.Value.(type) {
		case sops.TreeBranch, []any:
			return nil, fmt.Errorf("%v holds a mapping or a list, which a dotenv file cannot", item.Key)
		}
		value := strings.ReplaceAll(fmt.Sprint(item.Value), "\n", `\n`)
		fmt.Fprintf(&b, "%v=%s\n", item.Key, value)
	}
	return b.Bytes(), nil
}
