package testenv

import (
	"bytes"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"sigs.k8s.io/yaml"
)

// SopsFileOnlyFor returns encrypted, a YAML file encrypted with SOPS,
// with the master keys of its sops metadata replaced by one: entry names
// its kind as sops's metadata does (kms, gcp_kms, azure_kv, hc_vault,
// pgp), key holds its fields, and its enc, unless key sets one, is a
// placeholder. What a file encrypted for a key service looks like, without
// the service; its values no longer decrypt with the file's data key.
func SopsFileOnlyFor(t testing.TB, encrypted []byte, entry string, key map[string]any) []byte {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(encrypted, &doc); err != nil {
		t.Fatal(err)
	}
	md, ok := doc["sops"].(map[string]any)
	if !ok {
		t.Fatal("SopsFileOnlyFor: the file has no sops metadata")
	}
	for _, k := range []string{"age", "pgp", "kms", "gcp_kms", "azure_kv", "hc_vault"} {
		delete(md, k)
	}
	key["created_at"] = "2026-01-01T00:00:00Z"
	if key["enc"] == nil {
		key["enc"] = "c29tZSBlbmNyeXB0ZWQgZGF0YSBrZXk="
	}
	md[entry] = []any{key}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PGPKey is an OpenPGP key made in process that prefers zlib
// compression, so that messages encrypted for it are compressed.
type PGPKey struct {
	Entity *openpgp.Entity
	// ArmoredPrivate is its private key, as a key Secret's .asc entry
	// holds it.
	ArmoredPrivate string
	// Fingerprint is the primary key's, in upper-case hexadecimal.
	Fingerprint string
}

// NewCompressingPGPKey makes a PGPKey.
func NewCompressingPGPKey(t testing.TB) *PGPKey {
	t.Helper()
	e, err := openpgp.NewEntity("bomb", "", "bomb@driftless.dev", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, DefaultCompressionAlgo: packet.CompressionZLIB})
	if err != nil {
		t.Fatal(err)
	}
	var armored bytes.Buffer
	w, err := armor.Encode(&armored, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &PGPKey{Entity: e, ArmoredPrivate: armored.String(), Fingerprint: strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))}
}

// PGPMessage returns an armored OpenPGP message of size zero bytes:
// encrypted for to and compressed (zlib, level 9, about 1/1000) when to
// is not nil, else a plain literal packet that anyone can write. A
// message of 64 MiB is about 100 KiB.
func PGPMessage(t testing.TB, to *PGPKey, size int) string {
	t.Helper()
	var out bytes.Buffer
	aw, err := armor.Encode(&out, "PGP MESSAGE", nil)
	if err != nil {
		t.Fatal(err)
	}
	var w io.WriteCloser
	if to != nil {
		w, err = openpgp.Encrypt(aw, []*openpgp.Entity{to.Entity}, nil, nil, &packet.Config{
			DefaultCompressionAlgo: packet.CompressionZLIB, CompressionConfig: &packet.CompressionConfig{Level: 9}})
	} else {
		w, err = packet.SerializeLiteral(nopWriteCloser{aw}, true, "", 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<16)
	for n := 0; n < size; n += len(chunk) {
		if _, err := w.Write(chunk[:min(len(chunk), size-n)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
