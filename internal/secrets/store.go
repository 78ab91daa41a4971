package secrets

import (
	"errors"
	"fmt"
	"strings"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/stores"
)

// fileStore is a sops.Store of driftless's own for one format: a reader
// and a writer of the format's files, and where the format keeps SOPS's
// metadata. SOPS's own stores are not used: they take the config structs
// of sops/v3/config, which links SOPS's publish package (cloud storage
// clients) into every agent process. The metadata block itself is
// converted by sops/v3/stores, which links none of it.
type fileStore struct {
	name string
	// plain reads and writes the file as it is before encryption and
	// after decryption; encrypted as SOPS writes it with its metadata.
	// They differ only for the binary format.
	plain, encrypted codec
	// metadata is where the format keeps the sops block: under a "sops"
	// key (YAML, JSON), flattened below it (INI) or flattened into
	// sops_-prefixed keys (dotenv).
	metadata stores.MetadataOpts
	// value writes one value of the tree, as `sops decrypt --extract`.
	value func(any) ([]byte, error)
}

// codec reads a file into SOPS's tree and writes the tree back. A tree
// is the file's values in the file's order with their types, which is
// what the MAC is computed over: reading a file must give the tree the
// sops CLI gives, or the MAC does not match.
type codec struct {
	read  func([]byte) (sops.TreeBranches, error)
	write func(sops.TreeBranches) ([]byte, error)
}

// load and emit call read and write, and turn a panic into an error: the
// INI library panics writing a key whose comment starts with an empty
// line, and a file in git must not stop the agent. The panic's value is
// not shown, since it may quote the file.
func (c codec) load(in []byte) (branches sops.TreeBranches, err error) {
	defer func() {
		if recover() != nil {
			branches, err = nil, errors.New("the file cannot be read: its format's library failed on it")
		}
	}()
	return c.read(in)
}

func (c codec) emit(branches sops.TreeBranches) (out []byte, err error) {
	defer func() {
		if recover() != nil {
			out, err = nil, errors.New("the file cannot be written: its format's library failed on it")
		}
	}()
	return c.write(branches)
}

var _ sops.Store = (*fileStore)(nil)

func (s *fileStore) Name() string { return s.name }

// LoadEncryptedFile reads a file SOPS encrypted: its values, still
// encrypted, and its metadata. A file without the sops block returns
// sops.MetadataNotFound.
func (s *fileStore) LoadEncryptedFile(in []byte) (sops.Tree, error) {
	branches, err := s.encrypted.load(in)
	if err != nil {
		return sops.Tree{}, err
	}
	branches, md, err := stores.ExtractMetadata(branches, s.metadata)
	if err != nil {
		return sops.Tree{}, err
	}
	return sops.Tree{Branches: branches, Metadata: md}, nil
}

// LoadPlainFile reads a file before encryption.
func (s *fileStore) LoadPlainFile(in []byte) (sops.TreeBranches, error) {
	return s.plain.load(in)
}

// EmitEncryptedFile writes in's encrypted values and its metadata.
func (s *fileStore) EmitEncryptedFile(in sops.Tree) ([]byte, error) {
	branches, err := stores.SerializeMetadata(in, s.metadata)
	if err != nil {
		return nil, err
	}
	return s.encrypted.emit(branches)
}

// EmitPlainFile writes decrypted values as the sops CLI prints them.
func (s *fileStore) EmitPlainFile(in sops.TreeBranches) ([]byte, error) {
	return s.plain.emit(in)
}

// EmitValue writes one value of the tree.
func (s *fileStore) EmitValue(v any) ([]byte, error) { return s.value(v) }

// HasSopsTopLevelKey reports whether branch holds SOPS metadata.
func (s *fileStore) HasSopsTopLevelKey(branch sops.TreeBranch) bool {
	if s.metadata.Flatten != stores.MetadataFlattenFull {
		return stores.HasSopsTopLevelKey(branch)
	}
	for _, item := range branch {
		if key, ok := item.Key.(string); ok && strings.HasPrefix(key, stores.SopsPrefix) {
			return true
		}
	}
	return false
}

// commentLines returns the lines of a comment as the formats with
// comments keep them in the tree: without their comment character, empty
// lines dropped.
func commentLines(comment string) []string {
	var lines []string
	for _, line := range strings.Split(comment, "\n") {
		if line != "" {
			lines = append(lines, line[1:])
		}
	}
	return lines
}

// stringKey returns the key of a tree item, which SOPS requires to be a
// string.
func stringKey(item sops.TreeItem) (string, error) {
	key, ok := item.Key.(string)
	if !ok {
		return "", fmt.Errorf("a key of type %T (%v): only string keys are supported", item.Key, item.Key)
	}
	return key, nil
}

var errOneBranch = errors.New("the file must hold exactly one document")

// stricterThanSOPS marks a refusal of a file that SOPS's own stores read
// without a word: data after a JSON object, and a later YAML document
// that yaml.v3 cannot read as a mapping (a key twice, a value its tag
// does not fit), which SOPS checks in the first document only. Its
// message is the refusal's; the type lets the tests that compare these
// stores with SOPS's tell a refusal on purpose from a bug.
type stricterThanSOPS struct{ error }

func (e stricterThanSOPS) Unwrap() error { return e.error }
