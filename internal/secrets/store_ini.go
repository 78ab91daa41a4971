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

// iniStore reads and writes INI files with the INI library the sops CLI
// uses, so that sections, quoting and comments read as the CLI reads
// them: each section is a mapping of strings, its comment first, a key's
// comment after the key; the metadata is a [sops] section of flattened
// keys.
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

func readINI(in []byte) (sops.TreeBranches, error) {
	f, err := ini.LoadSources(iniOptions, in)
	if err != nil {
		return nil, fmt.Errorf("invalid INI: %w", err)
	}
	branch := sops.TreeBranch{}
	for _, section := range f.Sections() {
		items := sops.TreeBranch{}
		if section.Comment != "" {
			items = append(items, sops.TreeItem{Key: sops.Comment{Value: iniComment(section.Comment)}})
		}
		for _, key := range section.Keys() {
			items = append(items, sops.TreeItem{Key: key.Name(), Value: key.Value()})
			if key.Comment != "" {
				items = append(items, sops.TreeItem{Key: sops.Comment{Value: iniComment(key.Comment)}})
			}
		}
		branch = append(branch, sops.TreeItem{Key: section.Name(), Value: items})
	}
	return sops.TreeBranches{branch}, nil
}

// iniComment is a comment as the tree keeps it: without the ; or # and
// the spaces that start it.
func iniComment(c string) string {
	switch {
	case strings.HasPrefix(c, ";"):
		return strings.TrimLeft(c, "; ")
	case strings.HasPrefix(c, "#"):
		return strings.TrimLeft(c, "# ")
	}
	return c
}

// writeINI writes each item of the tree as a section. A section's first
// comment is the section's; a later comment belongs to the key before it
// (a key keeps one, the last).
func writeINI(branches sops.TreeBranches) ([]byte, error) {
	f := ini.Empty(iniOptions)
	f.DeleteSection(ini.DefaultSection)
	for _, branch := range branches {
		for _, item := range branch {
			if _, ok := item.Key.(sops.Comment); ok {
				continue
			}
			name, err := stringKey(item)
			if err != nil {
				return nil, err
			}
			section, err := f.NewSection(name)
			if err != nil {
				return nil, fmt.Errorf("section %s: %w", name, err)
			}
			items, ok := item.Value.(sops.TreeBranch)
			if !ok {
				return nil, errors.New("an INI file holds sections of keys, not values at its top level")
			}
			var last *ini.Key
			for i, kv := range items {
				if c, ok := kv.Key.(sops.Comment); ok {
					switch {
					case i == 0:
						section.Comment = c.Value
					case last != nil:
						last.Comment = c.Value
					}
					continue
				}
				name, err := stringKey(kv)
				if err != nil {
					return nil, err
				}
				if last, err = section.NewKey(name, stores.ValToString(kv.Value)); err != nil {
					return nil, fmt.Errorf("key %s: %w", name, err)
				}
			}
		}
	}
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
