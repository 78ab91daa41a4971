package source

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/driftless/driftless/internal/testenv"
)

// oneBlock armors the keys of several armored private keys as one block,
// as gpg --armor --export-secret-keys A B writes them.
func oneBlock(t *testing.T, keys ...string) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := armor.Encode(&out, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		block, err := armor.Decode(strings.NewReader(k))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, block.Body); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	return out.Bytes()
}

func TestParseSigningKeyRefusesWhatCannotSign(t *testing.T) {
	clear := testenv.NewOpenPGPKey(t, "Image Bot", "bot@example.com", "")
	locked := testenv.NewOpenPGPKey(t, "Image Bot", "bot@example.com", "hunter2")
	now := time.Now()
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want string // in the error; "" means the key is accepted
	}{
		{"an armored private key without a passphrase signs", map[string][]byte{"git.asc": []byte(clear.ArmoredPrivate)}, ""},
		{"a Secret without git.asc names the entry it needs",
			map[string][]byte{"key.asc": []byte(clear.ArmoredPrivate)}, "signing key Secret team/bot has no git.asc entry"},
		{"an entry that is not an armored key says how to export one",
			map[string][]byte{"git.asc": []byte("not a key")}, "git.asc is not an armored OpenPGP key"},
		{"a public key is not enough to sign",
			map[string][]byte{"git.asc": []byte(clear.ArmoredPublic)}, "holds a public key only"},
		{"a key protected by a passphrase is refused before any commit",
			map[string][]byte{"git.asc": []byte(locked.ArmoredPrivate)}, "(" + locked.ID + ") is protected by a passphrase"},
		{"two keys in one entry are ambiguous",
			map[string][]byte{"git.asc": oneBlock(t, clear.ArmoredPrivate, locked.ArmoredPrivate)}, "holds 2 keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseSigningKey("team/bot", tc.data, now)
			if tc.want == "" {
				if err != nil || e == nil {
					t.Fatalf("ParseSigningKey: %v, want the key", err)
				}
				return
			}
			var keyErr *SigningKeyError
			if !errors.As(err, &keyErr) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a *SigningKeyError containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "-----BEGIN") || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error holds key material: %v", err)
			}
		})
	}
}
