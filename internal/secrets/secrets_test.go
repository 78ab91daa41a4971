package secrets_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/driftless/driftless/internal/secrets"
)

const secretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: marker-s3cr3t-value
`

func newKey(t *testing.T) (*secrets.Keys, string, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.ParseKeys("Secret test/keys", map[string][]byte{"a.agekey": []byte("# comment\n" + id.String() + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	return keys, id.Recipient().String(), id.String()
}

func encrypt(t *testing.T, name, plain string, rule secrets.Rule) []byte {
	t.Helper()
	enc, err := secrets.Encrypt(name, []byte(plain), rule)
	if err != nil {
		t.Fatalf("Encrypt(%s): %v", name, err)
	}
	if bytes.Contains(enc, []byte("marker-s3cr3t-value")) {
		t.Fatalf("Encrypt(%s) left the value in plain text:\n%s", name, enc)
	}
	return enc
}

func TestEncryptedFilesDecryptToWhatWasEncrypted(t *testing.T) {
	keys, recipient, _ := newKey(t)
	for _, tc := range []struct{ name, plain, want string }{
		{"a Secret manifest encrypts only its data", "secret.yaml", secretYAML},
		{"a JSON document", "config.json", `{"password": "marker-s3cr3t-value"}`},
		{"a dotenv file", "db.env", "PASSWORD=marker-s3cr3t-value\n"},
		{"an INI file", "db.ini", "[db]\npassword = marker-s3cr3t-value\n"},
		{"a binary file", "tls.key", "-----BEGIN KEY-----\nmarker-s3cr3t-value\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := secrets.Rule{Recipients: []string{recipient}}
			if strings.HasSuffix(tc.plain, ".yaml") {
				rule.EncryptedRegex = secrets.SecretFields
			}
			enc := encrypt(t, tc.plain, tc.want, rule)
			if !secrets.Encrypted(enc) {
				t.Fatal("Encrypted() = false for an encrypted file")
			}
			got, err := keys.Decrypt(tc.plain, enc)
			if err != nil {
				t.Fatalf("Decrypt: %v", err)
			}
			if !strings.Contains(string(got), "marker-s3cr3t-value") {
				t.Errorf("Decrypt gave\n%s\nwant the value back", got)
			}
		})
	}
}

func TestSecretFieldsLeaveTheRestOfAManifestReadable(t *testing.T) {
	_, recipient, _ := newKey(t)
	enc := encrypt(t, "secret.yaml", secretYAML, secrets.Rule{Recipients: []string{recipient}, EncryptedRegex: secrets.SecretFields})
	for _, plain := range []string{"kind: Secret", "name: db", "encrypted_regex: ^(data|stringData)$"} {
		if !bytes.Contains(enc, []byte(plain)) {
			t.Errorf("encrypted file lacks %q:\n%s", plain, enc)
		}
	}
}

func TestBadFilesAreRefusedWithoutShowingValuesOrKeys(t *testing.T) {
	keys, recipient, identity := newKey(t)
	_, other, _ := newKey(t)
	good := string(encrypt(t, "secret.yaml", secretYAML, secrets.Rule{Recipients: []string{recipient}, EncryptedRegex: secrets.SecretFields}))
	all := string(encrypt(t, "secret.yaml", secretYAML, secrets.Rule{Recipients: []string{recipient}, EncryptedRegex: "^password$"}))
	forOther := string(encrypt(t, "secret.yaml", secretYAML, secrets.Rule{Recipients: []string{other}}))
	withoutMetadata := good[:strings.Index(good, "sops:")]
	for _, tc := range []struct {
		name, data, want string
	}{
		{"a file encrypted for another key names its recipients", forOther, "encrypted for age recipients " + other},
		{"a changed plain value fails the MAC", strings.Replace(good, "name: db", "name: dc", 1), "MAC mismatch"},
		// Not the MAC: the value is not an ENC[…] value where the
		// metadata says values are encrypted.
		{"a plain value added among the encrypted ones is refused as half-encrypted", strings.Replace(good, "stringData:", "stringData:\n    extra: marker-s3cr3t-value", 1), "half-encrypted or corrupt"},
		{"ENC values without sops metadata are half-encrypted", withoutMetadata, "half-encrypted: it holds ENC[…] values but no sops metadata"},
		{"an ENC value pasted outside the encrypted fields fails the MAC", strings.Replace(all, "name: db", "name: "+good[strings.Index(good, "ENC["):strings.Index(good, "ENC[")+strings.Index(good[strings.Index(good, "ENC["):], "]")+1], 1), "MAC mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keys.Decrypt("secret.yaml", []byte(tc.data))
			if err == nil {
				t.Fatal("Decrypt succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			for _, secret := range []string{"marker-s3cr3t-value", identity, "AGE-SECRET-KEY"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows %q", err, secret)
				}
			}
		})
	}
}

func TestKeySecretsWithoutAnIdentityAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries map[string][]byte
		want    string
	}{
		{"no .agekey entry", map[string][]byte{"identity": []byte("AGE-SECRET-KEY-1QQQ")}, "holds no decryption key: add an entry whose name ends in .agekey"},
		{"an entry that is not an identity", map[string][]byte{"a.agekey": []byte("AGE-SECRET-KEY-1NOTAKEY-marker")}, "entry a.agekey holds no valid age identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := secrets.ParseKeys("Secret ns/keys", tc.entries)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseKeys error = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "marker") {
				t.Errorf("error %q shows the entry's content", err)
			}
		})
	}
}

func TestDecryptWithoutSharedKeyListsWhatTheSecretHolds(t *testing.T) {
	keys, recipient, _ := newKey(t)
	_, other, _ := newKey(t)
	enc := encrypt(t, "db.env", "PASSWORD=marker-s3cr3t-value\n", secrets.Rule{Recipients: []string{other}})
	_, err := keys.Decrypt("db.env", enc)
	if err == nil || !strings.Contains(err.Error(), "it holds "+recipient) {
		t.Fatalf("error = %v, want it to name the recipient the Secret holds", err)
	}
	if errors.Unwrap(err) != nil && strings.Contains(errors.Unwrap(err).Error(), "AGE-SECRET") {
		t.Error("wrapped error shows key material")
	}
}

// A file `driftless secret encrypt` cannot read is named with the line
// and what is wrong there, never with a value of the file: the error is
// printed, and the file is about to be encrypted because it holds secrets.
func TestAFileThatCannotBeReadIsNamedByLineNotByValue(t *testing.T) {
	const secret = "marker-s3cr3t-value"
	for _, tc := range []struct{ name, file, plain, line string }{
		{"a YAML value its tag does not fit", "a.yaml", "kind: Secret\npassword: !!int " + secret + "\n", "line 2"},
		{"a YAML value its tag does not fit in a later document", "a.yaml", "a: 1\n---\nb: 2\npassword: !!bool " + secret + "\n", "line 4"},
		{"a YAML key that is a list", "a.yaml", "a: 1\n[" + secret + "]: x\n", "line 2"},
		{"a YAML merge of a value", "a.yaml", "a: 1\nb:\n  <<: " + secret + "\n", ""},
		{"a YAML document that is a value", "a.yaml", secret + "\n", ""},
		{"an INI line without =", "a.ini", "[db]\nuser = admin\npassword " + secret + "\n", "line 3"},
		{"an INI section never closed", "a.ini", "[db]\nuser = admin\n[" + secret + "\n", "line 3"},
		{"a dotenv line without =", "a.env", "USER=admin\nPASSWORD " + secret + "\n", "line 2"},
		{"a JSON number out of range", "a.json", "{\n\t\"user\": \"admin\",\n\t\"pin\": 1" + strings.Repeat("0", 400) + "\n}", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := secrets.Encrypt(tc.file, []byte(tc.plain), secrets.Rule{Recipients: []string{"age1unused"}})
			if err == nil {
				t.Fatal("Encrypt read it")
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:6]) {
				t.Errorf("the error quotes the file's value: %v", err)
			}
			if !strings.Contains(err.Error(), tc.line) {
				t.Errorf("the error %q does not say %q", err, tc.line)
			}
		})
	}
}

// sops's MAC is a hash of a file's values, in order: not of its keys, of
// the boundaries between values, nor of an empty or null value (sops
// writes an empty value unencrypted). So a hand edit that adds an empty
// value where values are encrypted, or a key to stringData that shadows
// one of data, passes the MAC; driftless refuses such a file.
func TestEditsTheMACDoesNotCoverAreRefused(t *testing.T) {
	keys, recipient, _ := newKey(t)
	rule := secrets.Rule{Recipients: []string{recipient}, EncryptedRegex: secrets.SecretFields}
	const withData = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  annotations:\n    note: \"\"\ndata:\n  password: bWFya2VyLXMzY3IzdC12YWx1ZQ==\n"
	good := string(encrypt(t, "secret.yaml", withData, rule))
	if _, err := keys.Decrypt("secret.yaml", []byte(good)); err != nil {
		t.Fatalf("the file as encrypted (an empty annotation, which is not encrypted) is refused: %v", err)
	}
	both := string(encrypt(t, "secret.yaml", withData+"stringData:\n  password: marker-s3cr3t-value-2\n", rule))
	for _, tc := range []struct {
		name, data, want string
	}{
		{"an empty stringData value added by hand shadows data's",
			good + "stringData:\n    password: \"\"\n",
			"sets password in both data and stringData"},
		{"an empty value added by hand where values are encrypted",
			strings.Replace(good, "\ndata:\n", "\ndata:\n    token: \"\"\n", 1),
			"has an empty value at data:token of a Secret, where its sops metadata says values are encrypted"},
		{"a null value added by hand where values are encrypted",
			strings.Replace(good, "\ndata:\n", "\ndata:\n    token: null\n", 1),
			"has a null value at data:token of a Secret, where its sops metadata says values are encrypted"},
		{"a key in both data and stringData, both encrypted",
			both,
			"sets password in both data and stringData"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := keys.Decrypt("secret.yaml", []byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decrypt error = %v\nwant %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "marker-s3cr3t-value") {
				t.Errorf("the error quotes a value: %v", err)
			}
		})
	}
}
