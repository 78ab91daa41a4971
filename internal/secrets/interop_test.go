package secrets_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
