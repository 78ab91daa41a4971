package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/stores"
	"gopkg.in/ini.v1"
)

// iniStore reads an INI file with the INI library the sops CLI uses
// (gopkg.in/ini.v1), so that sections, quoting, continuation lines and
// comments read as the CLI reads them, into one branch of one item per
// section, and writes the tree back through the same library: each
// section is a mapping of strings, its comment first, a key's comment
// after the key; the metadata is a [sops] section of flattened keys. It
// is written against the tests that compare it with SOPS's INI store
// (store_test.go): the same tree for every file, the same bytes for
// every tree.
func iniStore() *fileStore {
	c := codec{read: readINI, write: writeINI}
	return &fileStore{name: "ini", plain: c, encrypted: c,
		metadata: stores.MetadataOpts{Flatten: stores.MetadataFlattenBelowTop, EscapeNewlines: true},
		value: func(v any) ([]byte, error) {
			if branches, ok := v.(sops.TreeBranches); ok {
				return writeINI(branches)
			}
			return json.Marshal(v)
		}}
}

// iniOptions are the sops CLI's: a section may appear twice.
var iniOptions = ini.LoadOptions{AllowNonUniqueSections: true}

// readINI returns the sections of the file in its order, the library's
// DEFAULT section (keys before any section) first. A key given twice in
// a section keeps its last value.
func readINI(in []byte) (sops.TreeBranches, error) {
	f, err := ini.LoadSources(iniOptions, in)
	if err != nil {
		return nil, iniError(in, err)
	}
	sections := make(sops.TreeBranch, 0, len(f.Sections()))
	for _, sec := range f.Sections() {
		var keys sops.TreeBranch
		if sec.Comment != "" {
			keys = append(keys, sops.TreeItem{Key: sops.Comment{Value: iniCommentText(sec.Comment)}})
		}
		for _, k := range sec.Keys() {
			keys = append(keys, sops.TreeItem{Key: k.Name(), Value: k.Value()})
			if k.Comment != "" {
				keys = append(keys, sops.TreeItem{Key: sops.Comment{Value: iniCommentText(k.Comment)}})
			}
		}
		sections = append(sections, sops.TreeItem{Key: sec.Name(), Value: keys})
	}
	return sops.TreeBranches{sections}, nil
}

// iniCommentText is a comment as the tree keeps it: without its leading
// run of ; or # and the spaces after it. The library puts the comment
// character back when it writes the file.
func iniCommentText(c string) string {
	if c[0] == ';' || c[0] == '#' {
		c = strings.TrimLeft(c, c[:1])
	}
	return strings.TrimLeft(c, " ")
}

// iniError returns the library's error without the line it quotes, which
// may hold a value: what was wrong (the library's words before the
// quote) and the number of the line.
func iniError(in []byte, err error) error {
	what, quoted, found := strings.Cut(err.Error(), ": ")
	if !found {
		return fmt.Errorf("invalid INI: %s", what)
	}
	for i, line := range strings.Split(string(in), "\n") {
		if line = strings.TrimSpace(line); line != "" && strings.Contains(quoted, line) {
			return fmt.Errorf("invalid INI: line %d: %s", i+1, what)
		}
	}
	return fmt.Errorf("invalid INI: %s", what)
}

// writeINI writes the sections of the one branch in their order. The
// library's file starts with its DEFAULT section (written without a
// header, and not at all when empty): the first DEFAULT of the tree
// fills it, a later one is a section of its own. In a section, a comment
// before the first key is the section's; a comment after a key is that
// key's (a key keeps one: the last).
func writeINI(branches sops.TreeBranches) ([]byte, error) {
	if len(branches) != 1 {
		return nil, errOneBranch
	}
	f := ini.Empty(iniOptions)
	defaultSection := f.Section(ini.DefaultSection)
	for _, item := range branches[0] {
		if _, ok := item.Key.(sops.Comment); ok {
			continue
		}
		name, err := stringKey(item)
		if err != nil {
			return nil, err
		}
		keys, ok := item.Value.(sops.TreeBranch)
		if !ok {
			return nil, errors.New("an INI file holds sections of keys, not values at its top level")
		}
		var sec *ini.Section
		if name == ini.DefaultSection && defaultSection != nil {
			sec, defaultSection = defaultSection, nil
		} else if sec, err = f.NewSection(name); err != nil {
			return nil, fmt.Errorf("section %s: %w", name, err)
		}
		if err := writeINIKeys(sec, keys); err != nil {
			return nil, fmt.Errorf("section %s: %w", name, err)
		}
	}
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeINIKeys(sec *ini.Section, keys sops.TreeBranch) error {
	var last *ini.Key
	for _, item := range keys {
		if c, ok := item.Key.(sops.Comment); ok {
			if last == nil {
				sec.Comment = c.Value
			} else {
				last.Comment = c.Value
			}
			continue
		}
		key, err := stringKey(item)
		if err != nil {
			return err
		}
		if last, err = sec.NewKey(key, fmt.Sprint(item.Value)); err != nil {
			return fmt.Errorf("key %s: %w", key, err)
		}
	}
	return nil
}
