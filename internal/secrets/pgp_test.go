package secrets_test

import (
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
)

// sopsEncryptPGP encrypts a Secret manifest for key with the real sops CLI.
func sopsEncryptPGP(t *testing.T, key *testenv.GPGKey) []byte {
	t.Helper()
	return []byte(testenv.SopsEncrypt(t, "secret.yaml", secretYAML, []string{"GNUPGHOME=" + key.Home}, "--pgp", key.Fingerprint, "--encrypted-regex", secrets.SecretFields))
}

func TestFilesSopsEncryptedForAPGPKeyDecryptWithItsArmoredPrivateKey(t *testing.T) {
	key := testenv.NewGPGEncryptionKey(t, "")
	enc := sopsEncryptPGP(t, key)
	keys, err := secrets.ParseKeys("Secret shop/sops-gpg", map[string][]byte{"sops.asc": []byte(key.ArmoredPrivate)})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys.PGPFingerprints(); len(got) != 1 || got[0] != key.Fingerprint {
		t.Errorf("PGPFingerprints() = %v, want [%s]", got, key.Fingerprint)
	}
	plain, err := keys.Decrypt("secret.yaml", enc)
	if err != nil {
		t.Fatalf("Decrypt: %v", err)
	}
	if !strings.Contains(string(plain), "password: marker-s3cr3t-value") {
		t.Errorf("Decrypt gave\n%s\nwant the value", plain)
	}
}

func TestAFileForAnotherPGPKeyFailsNamingBothFingerprints(t *testing.T) {
	theirs := testenv.NewGPGEncryptionKey(t, "")
	ours := testenv.NewGPGEncryptionKey(t, "")
	enc := sopsEncryptPGP(t, theirs)
	keys, err := secrets.ParseKeys("Secret shop/sops-gpg", map[string][]byte{"sops.asc": []byte(ours.ArmoredPrivate)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = keys.Decrypt("secret.yaml", enc)
	want := "is encrypted for PGP keys " + theirs.Fingerprint + ", none of which the key Secret holds (it holds " + ours.Fingerprint + ")"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Decrypt error = %v, want %q", err, want)
	}
	if strings.Contains(err.Error(), "marker-s3cr3t-value") || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("the error quotes a secret: %v", err)
	}
}

func TestPGPKeysTheAgentCannotUseAreRefusedNamingTheEntry(t *testing.T) {
	protected := testenv.NewGPGEncryptionKey(t, "correct horse")
	public := testenv.NewOpenPGPKey(t, "public", "public@driftless.dev", "").ArmoredPublic
	for _, tc := range []struct {
		name, entry, want string
	}{
		{"a passphrase-protected key", protected.ArmoredPrivate, "entry sops.asc holds PGP key " + protected.Fingerprint + " protected by a passphrase, which the agent cannot type"},
		{"a public key only", public, "entry sops.asc holds only public PGP keys: export the private key"},
		{"no armored key", "not a key", "entry sops.asc holds no armored PGP key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := secrets.ParseKeys("Secret shop/sops-gpg", map[string][]byte{"sops.asc": []byte(tc.entry)})
			if err == nil || !strings.Contains(err.Error(), "Secret shop/sops-gpg: "+tc.want) {
				t.Fatalf("ParseKeys error = %v, want %q", err, tc.want)
			}
		})
	}
}
