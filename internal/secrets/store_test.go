package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/stores/dotenv"
	"github.com/getsops/sops/v3/stores/ini"
	"github.com/getsops/sops/v3/stores/json"
	"github.com/getsops/sops/v3/stores/yaml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// sopsStore is SOPS's own store for the format, the reference driftless's
// stores must agree with: the same tree (order, types, comments) for the
// same file, and the same bytes for the same tree. Only tests link it
// (it links sops/v3/config and its publish package).
func sopsStore(f Format) sops.Store {
	switch f {
	case YAML:
		return yaml.NewStore(&config.YAMLStoreConfig{})
	case JSON:
		// The sops CLI's default indentation is a tab: -1.
		return json.NewStore(&config.JSONStoreConfig{Indent: -1})
	case Dotenv:
		return dotenv.NewStore(&config.DotenvStoreConfig{})
	case INI:
		return ini.NewStore(&config.INIStoreConfig{})
	}
	return json.NewBinaryStore(&config.JSONBinaryStoreConfig{Indent: -1})
}

// sameTree compares trees as the MAC and the writers see them: an empty
// mapping or list is the same whether nil or not.
var sameTree = cmpopts.EquateEmpty()

// formatFixtures are plain files of every format with what SOPS must
// keep: comments, nested lists, lists of mappings, several documents,
// unicode, empty values, numbers, booleans and nulls.
func formatFixtures(t *testing.T) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("testdata/formats/*")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(name)] = data
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/formats")
	}
	return files
}

func TestStoresReadAndWriteFilesAsSopsDoes(t *testing.T) {
	for name, data := range formatFixtures(t) {
		t.Run(name, func(t *testing.T) {
			assertSameAsSops(t, FormatOf(name), data, false)
		})
	}
}

// assertSameAsSops checks that driftless's store for f and SOPS's read
// data to the same tree (or both refuse it), write that tree to the same
// plain bytes, and write it with metadata to the same encrypted file,
// which both read back to the same tree and metadata. With mayRefuse,
// driftless may refuse a file SOPS reads (trailing data after a JSON
// object, a key twice in a later YAML document, a YAML value of a tag it
// does not fit), never the other way round.
func assertSameAsSops(t *testing.T, f Format, data []byte, mayRefuse bool) {
	t.Helper()
	ours, theirs := f.store(), sopsStore(f)
	want, wantErr := noPanic(func() (sops.TreeBranches, error) { return theirs.LoadPlainFile(data) })
	got, err := ours.LoadPlainFile(data)
	if mayRefuse && err != nil && wantErr == nil {
		var onPurpose stricterThanSOPS
		if !errors.As(err, &onPurpose) {
			t.Fatalf("LoadPlainFile refuses a file sops's store reads: %v", err)
		}
		return
	}
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("LoadPlainFile: error %v, sops's store: %v", err, wantErr)
	}
	if err != nil {
		return
	}
	if diff := cmp.Diff(want, got, sameTree); diff != "" {
		t.Fatalf("LoadPlainFile gave another tree than sops's store (-sops +driftless):\n%s", diff)
	}
	wantPlain, wantErr := noPanic(func() ([]byte, error) { return theirs.EmitPlainFile(want) })
	gotPlain, err := ours.EmitPlainFile(got)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("EmitPlainFile: error %v, sops's store: %v", err, wantErr)
	}
	loadPlain := func(s sops.Store, b []byte) (any, error) { return s.LoadPlainFile(b) }
	assertWritesAsSops(t, "EmitPlainFile", loadPlain, ours, theirs, got, wantPlain, gotPlain)

	tree := sops.Tree{Branches: got, Metadata: testMetadata(t)}
	wantEnc, wantErr := noPanic(func() ([]byte, error) { return theirs.EmitEncryptedFile(tree) })
	gotEnc, err := ours.EmitEncryptedFile(tree)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("EmitEncryptedFile: error %v, sops's store: %v", err, wantErr)
	}
	if err != nil {
		return
	}
	loadEnc := func(s sops.Store, b []byte) (any, error) {
		tree, err := s.LoadEncryptedFile(b)
		return tree.Branches, err
	}
	assertWritesAsSops(t, "EmitEncryptedFile", loadEnc, ours, theirs, got, wantEnc, gotEnc)
	if string(wantEnc) != string(gotEnc) {
		return
	}
	wantTree, wantErr := noPanic(func() (sops.Tree, error) { return theirs.LoadEncryptedFile(wantEnc) })
	gotTree, err := ours.LoadEncryptedFile(wantEnc)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("LoadEncryptedFile: error %v, sops's store: %v", err, wantErr)
	}
	if diff := cmp.Diff(wantTree, gotTree, sameTree, cmpopts.IgnoreUnexported(age.MasterKey{})); diff != "" {
		t.Errorf("LoadEncryptedFile gave another tree than sops's store (-sops +driftless):\n%s", diff)
	}
}

// assertWritesAsSops checks that driftless wrote what SOPS's store wrote
// for tree; or, where SOPS's output does not read back to tree (yaml.v3
// cannot encode some strings, and SOPS writes null in their place), that
// driftless's does.
func assertWritesAsSops(t *testing.T, what string, load func(sops.Store, []byte) (any, error), ours, theirs sops.Store, tree sops.TreeBranches, want, got []byte) {
	t.Helper()
	diff := cmp.Diff(string(want), string(got))
	if diff == "" {
		return
	}
	if back, err := noPanic(func() (any, error) { return load(theirs, want) }); err == nil && cmp.Equal(any(tree), back, sameTree) {
		t.Errorf("%s wrote another file than sops's store (-sops +driftless):\n%s", what, diff)
		return
	}
	back, err := load(ours, got)
	if err != nil {
		t.Fatalf("%s wrote what neither sops's store nor driftless's reads back: %v\n%s", what, err, got)
	}
	if diff := cmp.Diff(any(tree), back, sameTree); diff != "" {
		t.Errorf("%s wrote what sops's store does not read back, nor driftless's (-written +read back):\n%s", what, diff)
	}
}

// noPanic calls one of SOPS's stores, a panic an error: where SOPS's store
// panics, driftless's must return an error.
func noPanic[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sops's store panicked: %v", r)
		}
	}()
	return f()
}

// testMetadata is a sops block with every field a store writes.
func testMetadata(t *testing.T) sops.Metadata {
	t.Helper()
	mk, err := age.MasterKeyFromRecipient("age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p")
	if err != nil {
		t.Fatal(err)
	}
	mk.EncryptedKey = "-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n-----END AGE ENCRYPTED FILE-----\n"
	return sops.Metadata{
		KeyGroups:                 []sops.KeyGroup{{mk}},
		LastModified:              time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC),
		MessageAuthenticationCode: "ENC[AES256_GCM,data:bWFj,iv:aXY=,tag:dGFn,type:str]",
		EncryptedRegex:            SecretFields,
		MACOnlyEncrypted:          true,
		Version:                   sopsVersion,
	}
}

func TestStoresReadEdgeCasesAsSopsDoes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		data   string
	}{
		{"an empty YAML file", YAML, ""},
		{"a YAML file of one empty line", YAML, "\n"},
		{"a YAML file of only a comment", YAML, "# nothing here\n"},
		{"an empty YAML document", YAML, "---\n"},
		{"YAML comments around an empty document", YAML, "a: 1\n--- # c\n~ # d\n# e\n---\nb: 2\n"},
		{"empty YAML documents between others", YAML, "a: 1\n---\n---\n# c\nb: 2\n"},
		{"a YAML document with a document-start comment", YAML, "--- # start\na: 1\n...\n"},
		{"a YAML key twice", YAML, "a: 1\na: 2\n"},
		{"a YAML key that is a number", YAML, "1: one\n"},
		{"a YAML list document", YAML, "- a\n- b\n"},
		{"a YAML scalar document", YAML, "just a string\n"},
		{"YAML comments around an empty mapping", YAML, "a: # after a\n  # inside\n  {}\n# after\n"},
		{"YAML comments in a list of lists", YAML, "a:\n  # head\n  - # inline\n    - x # x\n    # foot x\n  - []\n"},
		{"a YAML merge key", YAML, "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n"},
		{"YAML tabs and CRLF", YAML, "a: 1\r\nb:\r\n  - c\r\n"},
		{"invalid YAML", YAML, "a: [1, 2\n"},
		{"a YAML string yaml.v3 cannot encode (sops writes null)", YAML, "key: \"\\t\\n\"\n\"\\t\\n\": a key\n"},
		{"an empty JSON object", JSON, "{}"},
		{"a JSON array", JSON, "[1, 2]"},
		{"a JSON string", JSON, `"a"`},
		{"a JSON key twice", JSON, `{"a": 1, "a": 2}`},
		{"a truncated JSON object", JSON, `{"a": 1`},
		{"an empty JSON file", JSON, ""},
		{"a huge JSON number", JSON, `{"a": 1e400}`},
		{"an empty dotenv file", Dotenv, ""},
		{"a dotenv line without =", Dotenv, "JUST_A_WORD\n"},
		{"dotenv CRLF lines", Dotenv, "A=1\r\nB=2\r\n"},
		{"a dotenv value with a literal backslash-n", Dotenv, `A=x\ny` + "\n"},
		{"an empty INI file", INI, ""},
		{"an INI key without a value", INI, "[s]\nflag\n"},
		{"INI continuation and quotes", INI, "[s]\na = \"\"\"multi\nline\"\"\"\nb = `raw`\n"},
		{"an INI [DEFAULT] section", INI, "[DEFAULT]\nk = v\n[other]\nx = y\n"},
		{"an INI key comment that starts with an empty line", INI, "[s]\n#\n#\nk = v\n"},
		{"an empty binary file", Binary, ""},
		{"a binary file that is not UTF-8", Binary, "\xff\xfe\x00bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertSameAsSops(t, tc.format, []byte(tc.data), false)
		})
	}
}

// FuzzStoresReadAsSopsReads feeds any file to driftless's store and
// SOPS's, for every format: whatever driftless reads, it reads to SOPS's
// tree and writes as SOPS writes it.
func FuzzStoresReadAsSopsReads(f *testing.F) {
	formats := []Format{YAML, JSON, Dotenv, INI, Binary}
	names, _ := filepath.Glob("testdata/formats/*")
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for i, format := range formats {
			if format == FormatOf(name) {
				f.Add(uint8(i), data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, format uint8, data []byte) {
		assertSameAsSops(t, formats[int(format)%len(formats)], data, true)
	})
}

func TestStoresRefuseWhatSopsReadsSilently(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		data   string
	}{
		{"data after a JSON object", JSON, `{"a": 1} {"b": 2}`},
		{"a key twice in a later YAML document", YAML, "a: 1\n---\nb: 1\nb: 2\n"},
		{"a YAML value its tag does not fit in a later document", YAML, "a: 1\n---\nb: !!int abc\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sopsStore(tc.format).LoadPlainFile([]byte(tc.data)); err != nil {
				t.Fatalf("sops's store refuses it too: %v", err)
			}
			_, err := tc.format.store().LoadPlainFile([]byte(tc.data))
			var onPurpose stricterThanSOPS
			switch {
			case err == nil:
				t.Error("LoadPlainFile read it")
			case !errors.As(err, &onPurpose):
				// The fuzz target accepts only these refusals.
				t.Errorf("LoadPlainFile refuses it (%v), but not as a refusal on purpose", err)
			}
		})
	}
}
