package secrets_test

import (
	"runtime"
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

// A data key is 32 bytes. A file whose PGP data key is a compressed
// message of hundreds of MiB (a few hundred KiB in git) once made the
// agent allocate it all, past its memory limit, at every restart: it is
// refused after reading a few bytes of it, naming the key and why.
func TestAPGPDataKeyThatIsNotOneIsRefusedWithoutReadingItAll(t *testing.T) {
	key := testenv.NewCompressingPGPKey(t)
	fpr := key.Fingerprint
	keys, err := secrets.ParseKeys("Secret shop/sops-gpg", map[string][]byte{"sops.asc": []byte(key.ArmoredPrivate)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, message, want string
	}{
		{"a compressed message of 64 MiB", testenv.PGPMessage(t, key, 64<<20),
			"is encrypted for PGP key " + fpr + " with a data key longer than 64 bytes (a SOPS data key is 32): the file was not written by sops; encrypt it again (driftless secret encrypt)"},
		{"a message encrypted for no key", testenv.PGPMessage(t, nil, 32),
			"is encrypted for PGP key " + fpr + " with a data key that is not encrypted (anyone could have written it): the file was not written by sops; encrypt it again (driftless secret encrypt)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := encryptedFor(t, "pgp", map[string]any{"fp": fpr, "enc": tc.message})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := keys.Decrypt("secret.yaml", file)
			runtime.ReadMemStats(&after)
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
				t.Errorf("Decrypt allocated %d MiB for a %d KiB file; want it to stop reading the data key after a few bytes", grown>>20, len(file)>>10)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decrypt error = %v\nwant %q", err, tc.want)
			}
		})
	}
}
