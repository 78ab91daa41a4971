package secrets

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/stores"
)

// dotenvStore reads and writes KEY=VALUE lines as the sops CLI does: no
// quoting, a literal \n in a value is a newline, a line starting with #
// is a comment, empty lines are dropped; the metadata is kept in
// sops_-prefixed keys.
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

func readDotenv(in []byte) (sops.TreeBranches, error) {
	branch := sops.TreeBranch{}
	for i, line := range bytes.Split(in, []byte("\n")) {
		switch {
		case len(line) == 0:
		case line[0] == '#':
			branch = append(branch, sops.TreeItem{Key: sops.Comment{Value: string(line[1:])}})
		default:
			key, value, ok := bytes.Cut(line, []byte("="))
			if !ok {
				return nil, fmt.Errorf("line %d is neither KEY=VALUE nor a # comment", i+1)
			}
			branch = append(branch, sops.TreeItem{Key: string(key), Value: strings.ReplaceAll(string(value), `\n`, "\n")})
		}
	}
	return sops.TreeBranches{branch}, nil
}

func writeDotenv(branches sops.TreeBranches) ([]byte, error) {
	if len(branches) != 1 {
		return nil, errOneBranch
	}
	var b bytes.Buffer
	for _, item := range branches[0] {
		if c, ok := item.Key.(sops.Comment); ok {
			b.WriteString("#" + c.Value + "\n")
			continue
		}
		if stores.IsComplexValue(item.Value) {
			return nil, fmt.Errorf("%v holds a mapping or a list, which a dotenv file cannot", item.Key)
		}
		value, ok := item.Value.(string)
		if ok {
			value = strings.ReplaceAll(value, "\n", `\n`)
		} else {
			value = stores.ValToString(item.Value)
		}
		fmt.Fprintf(&b, "%v=%s\n", item.Key, value)
	}
	return b.Bytes(), nil
}
