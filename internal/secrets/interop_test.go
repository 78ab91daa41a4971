package secrets_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
)

// testdataKeys are the keys of the fixtures the sops CLI wrote.
func testdataKeys(t *testing.T) (*secrets.Keys, string) {
	t.Helper()
	data, err := os.ReadFile("testdata/test-only.agekey")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.ParseKeys("testdata", map[string][]byte{"test-only.agekey": data})
	if err != nil {
		t.Fatal(err)
	}
	return keys, keys.Recipients()[0]
}

func TestFilesTheSopsCLIWroteDecrypt(t *testing.T) {
	keys, _ := testdataKeys(t)
	for _, name := range []string{"secret.sops.yaml", "db.sops.env"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := keys.Decrypt(name, data)
			if err != nil {
				t.Fatalf("Decrypt: %v", err)
			}
			if !bytes.Contains(plain, []byte("marker-s3cr3t-value")) {
				t.Errorf("Decrypt gave\n%s\nwant the value", plain)
			}
		})
	}
}

// sopsCLI returns the reference sops CLI that `make sops` builds, or
// skips the test (fails it under CI=true, where make test builds it).
func sopsCLI(t *testing.T) string { return testenv.SopsCLI(t) }

func TestSopsCLIAndDriftlessReadEachOthersFiles(t *testing.T) {
	sops := sopsCLI(t)
	keys, recipient := testdataKeys(t)
	keyFile, _ := filepath.Abs("testdata/test-only.agekey")
	for _, tc := range []struct{ name, plain string }{
		{"secret.yaml", secretYAML},
		{"config.json", "{\n\t\"password\": \"marker-s3cr3t-value\"\n}"},
		{"db.env", "PASSWORD=marker-s3cr3t-value\n"},
		{"db.ini", "[db]\npassword = marker-s3cr3t-value\n"},
		{"tls.key", "-----BEGIN KEY-----\nmarker-s3cr3t-value\n"},
	} {
		t.Run("driftless encrypts, sops decrypts "+tc.name, func(t *testing.T) {
			rule, err := secrets.RuleFor(tc.name, "", []string{recipient})
			if err != nil {
				t.Fatal(err)
			}
			enc, err := secrets.Encrypt(tc.name, []byte(tc.plain), rule)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(file, enc, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(sops, "decrypt", file)
			cmd.Env = append(os.Environ(), "SOPS_AGE_KEY_FILE="+keyFile)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sops decrypt: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "marker-s3cr3t-value") {
				t.Errorf("sops decrypt gave\n%s", out)
			}
		})
		t.Run("sops encrypts, driftless decrypts "+tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(file, []byte(tc.plain), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(sops, "encrypt", "--age", recipient, file).CombinedOutput()
			if err != nil {
				t.Fatalf("sops encrypt: %v\n%s", err, out)
			}
			plain, err := keys.Decrypt(tc.name, out)
			if err != nil {
				t.Fatalf("Decrypt: %v", err)
			}
			if !strings.Contains(string(plain), "marker-s3cr3t-value") {
				t.Errorf("Decrypt gave\n%s", plain)
			}
		})
	}
}

// TestSopsCLIAndDriftlessAgreeOnEveryFormat runs each fixture of
// testdata/formats (comments, nested lists, lists of mappings, several
// documents, unicode, empty values) through the sops CLI and driftless
// both ways: a file the CLI encrypted decrypts here to what the CLI itself
// prints for it, and a file encrypted here decrypts with the CLI to the
// same. A tree read in another order or with another type than the CLI's
// fails the MAC; a comment put elsewhere does not decrypt.
func TestSopsCLIAndDriftlessAgreeOnEveryFormat(t *testing.T) {
	sops := sopsCLI(t)
	keys, recipient := testdataKeys(t)
	keyFile, _ := filepath.Abs("testdata/test-only.agekey")
	_, other, _ := newKey(t)
	for _, tc := range []struct {
		name, file string
		// rule is what driftless encrypts with, args what the CLI does.
		rule secrets.Rule
		args []string
		// cliOnly: driftless does not write files of these args.
		cliOnly bool
		// config is a .sops.yaml for the CLI, for what it has no flag for.
		config string
	}{
		{name: "YAML comments, everything encrypted", file: "comments.yaml"},
		{name: "YAML comments, encrypted_regex", file: "comments.yaml",
			rule: secrets.Rule{EncryptedRegex: secrets.SecretFields}, args: []string{"--encrypted-regex", secrets.SecretFields}},
		{name: "YAML documents, encrypted_regex", file: "multidoc.yaml",
			rule: secrets.Rule{EncryptedRegex: secrets.SecretFields}, args: []string{"--encrypted-regex", secrets.SecretFields}},
		{name: "YAML types, everything encrypted", file: "types.yaml"},
		{name: "YAML types, unencrypted_suffix", file: "types.yaml",
			rule: secrets.Rule{UnencryptedSuffix: "_string"}, args: []string{"--unencrypted-suffix", "_string"}},
		{name: "YAML types, mac_only_encrypted", file: "types.yaml", cliOnly: true,
			config: "creation_rules:\n  - mac_only_encrypted: true\n    encrypted_regex: ^(password|anchors)$\n"},
		{name: "JSON, everything encrypted", file: "config.json"},
		{name: "JSON, unencrypted_regex", file: "config.json",
			rule: secrets.Rule{UnencryptedRegex: "^(nothing|html)$"}, args: []string{"--unencrypted-regex", "^(nothing|html)$"}},
		{name: "dotenv", file: "app.env"},
		{name: "dotenv, encrypted_suffix", file: "app.env",
			rule: secrets.Rule{EncryptedSuffix: "PASSWORD"}, args: []string{"--encrypted-suffix", "PASSWORD"}},
		{name: "INI", file: "app.ini"},
		{name: "INI, two recipients", file: "app.ini", rule: secrets.Rule{Recipients: []string{other}}},
		{name: "binary", file: "tls.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := os.ReadFile(filepath.Join("testdata/formats", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			rule := tc.rule
			rule.Recipients = append([]string{recipient}, rule.Recipients...)
			args := append([]string{"encrypt", "--age", strings.Join(rule.Recipients, ",")}, tc.args...)
			if tc.config != "" {
				config := filepath.Join(t.TempDir(), ".sops.yaml")
				if err := os.WriteFile(config, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config", config}, args...)
			}
			byCLI := sopsRun(t, sops, keyFile, tc.file, plain, args...)
			want := sopsRun(t, sops, keyFile, tc.file, byCLI, "decrypt")

			got, err := keys.Decrypt(tc.file, byCLI)
			if err != nil {
				t.Fatalf("Decrypt of the CLI's file: %v\n%s", err, byCLI)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("Decrypt of the CLI's file differs from sops decrypt (-sops +driftless):\n%s", diff)
			}
			if tc.cliOnly {
				return
			}
			ours, err := secrets.Encrypt(tc.file, plain, rule)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(sopsRun(t, sops, keyFile, tc.file, ours, "decrypt"))); diff != "" {
				t.Errorf("sops decrypt of driftless's file differs from that of its own (-own +driftless's):\n%s", diff)
			}
		})
	}
}

// sopsRun writes data to a file called name and runs the sops CLI on it
// with the test key; it returns what the CLI prints.
func sopsRun(t *testing.T, sops, keyFile, name string, data []byte, args ...string) []byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sops, append(args, file)...)
	cmd.Env = append(os.Environ(), "SOPS_AGE_KEY_FILE="+keyFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}
