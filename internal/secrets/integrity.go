package secrets

import (
	"errors"
	"fmt"
	"strings"

	"github.com/getsops/sops/v3"
)

// sops's MAC is a SHA-512 of a file's values in the order of the tree,
// each written as its bytes: it covers no key, no boundary between two
// values, and no empty or null value (sops writes an empty value as it
// is, unencrypted, and skips a null). These are the edits it lets
// through that change what a Secret holds; uncovered refuses them.

// uncovered returns an error when a Secret manifest of tree, decrypted
// with key, holds what a hand edit could have added without failing the
// MAC: one key in both data and stringData (stringData wins in the API
// server), or an empty or null value where the metadata says values are
// encrypted. Other documents and files are not checked: sops itself
// writes an empty value unencrypted, and they may hold one. The error
// names the key's path, never a value.
func uncovered(tree sops.Tree, key []byte) error {
	for _, doc := range tree.Branches {
		if !isSecret(doc) {
			continue
		}
		if err := shadowedKeys(doc); err != nil {
			return err
		}
		var found emptyLeaves
		// Encrypting a copy with a cipher that only looks tells which
		// leaves sops encrypts, by its own rules (suffixes, regexes,
		// comments).
		copied := sops.TreeBranches{copyMarkingNulls(doc).(sops.TreeBranch)}
		if _, err := (sops.Tree{Branches: copied, Metadata: tree.Metadata}).Encrypt(key, &found); err != nil {
			return errors.New("cannot be checked after decryption; encrypt the file again (driftless secret encrypt)")
		}
		if found.path != "" {
			return fmt.Errorf("has %s value at %s of a Secret, where its sops metadata says values are encrypted: sops's MAC covers neither keys nor empty or null values, so one added by hand passes it; "+
				"remove the key or give it a value, and encrypt the file again (driftless secret edit); sign your commits and set spec.source.git.verify to know who changed a file", found.what, found.path)
		}
	}
	return nil
}

func isSecret(doc sops.TreeBranch) bool {
	for _, item := range doc {
		if item.Key == "kind" {
			return item.Value == "Secret"
		}
	}
	return false
}

// shadowedKeys refuses a Secret document that sets a key in both data and
// stringData.
func shadowedKeys(doc sops.TreeBranch) error {
	var data, stringData sops.TreeBranch
	for _, item := range doc {
		switch item.Key {
		case "data":
			data, _ = item.Value.(sops.TreeBranch)
		case "stringData":
			stringData, _ = item.Value.(sops.TreeBranch)
		}
	}
	for _, d := range data {
		for _, s := range stringData {
			if d.Key == s.Key {
				return fmt.Errorf("sets %v in both data and stringData of a Secret, where the API server keeps stringData's: sops's MAC does not cover keys, so one added by hand passes it; "+
					"keep the key in one of them, and encrypt the file again (driftless secret edit)", d.Key)
			}
		}
	}
	return nil
}

// nullMark stands for a null value in copyMarkingNulls's copy, which
// sops's walk would skip: a string no value of a file holds by chance.
const nullMark = "\x00driftless: null\x00"

// copyMarkingNulls deep-copies v, a decrypted tree's value, with nullMark
// in place of each null.
func copyMarkingNulls(v any) any {
	switch v := v.(type) {
	case nil:
		return nullMark
	case sops.TreeBranch:
		out := make(sops.TreeBranch, len(v))
		for i, item := range v {
			out[i] = sops.TreeItem{Key: item.Key, Value: copyMarkingNulls(item.Value)}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyMarkingNulls(e)
		}
		return out
	}
	return v
}

// emptyLeaves is a sops.Cipher that encrypts nothing: it keeps the path
// of the first empty or null value sops would encrypt.
type emptyLeaves struct{ what, path string }

func (e *emptyLeaves) Encrypt(plaintext any, _ []byte, path string) (string, error) {
	what := ""
	switch plaintext {
	case "":
		what = "an empty"
	case nullMark:
		what = "a null"
	}
	if what != "" && e.path == "" {
		e.what, e.path = what, strings.TrimSuffix(path, ":")
	}
	return "x", nil
}

func (e *emptyLeaves) Decrypt(string, []byte, string) (any, error) {
	return nil, errors.New("emptyLeaves does not decrypt")
}
