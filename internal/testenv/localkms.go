package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// LocalKMS is an AWS KMS emulator (github.com/nsmithuk/local-kms, which
// `make local-kms` builds into bin/tools) serving one symmetric key.
type LocalKMS struct {
	// Endpoint is its URL, for AWS_ENDPOINT_URL_KMS.
	Endpoint string
	// KeyARN is the ARN of its key, for sops encrypt --kms.
	KeyARN string
}

// localKMSKeyID is the key local-kms is seeded with.
const localKMSKeyID = "6d0c6a3c-58b5-4d5e-9f4a-1b2c3d4e5f60"

var localKMSStarted = regexp.MustCompile(`Local KMS started on [0-9.]+:([0-9]+)`)

// NewLocalKMS starts local-kms on a free port, with its data in a
// temporary directory, stopped at the end of the test. Any access key is
// accepted: it checks no signature. When local-kms is not built it skips
// the test, or fails it under CI=true (MissingTool).
func NewLocalKMS(t testing.TB) *LocalKMS {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "tools", "local-kms")
	if _, err := os.Stat(bin); err != nil {
		MissingTool(t, "local-kms is not at %s: run make local-kms", bin)
	}
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.yaml")
	// A 256-bit backing key, fixed: the emulator holds test data only.
	if err := os.WriteFile(seed, []byte(`Keys:
  Symmetric:
    Aes:
      - Metadata:
          KeyId: `+localKMSKeyID+`
        BackingKeys:
          - 5cdaead27fe7da2de47945d73cd6d79e36494e73802f3cd3869f1d2cb0b5d7a9
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT=0", "KMS_REGION=eu-west-2", "KMS_ACCOUNT_ID=111122223333",
		"KMS_DATA_PATH="+filepath.Join(dir, "data"), "KMS_SEED_PATH="+seed)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := StartTied(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := localKMSStarted.FindStringSubmatch(lines.Text()); m != nil {
				port <- m[1]
			}
		}
	}()
	select {
	case p := <-port:
		return &LocalKMS{
			Endpoint: "http://127.0.0.1:" + p,
			KeyARN:   fmt.Sprintf("arn:aws:kms:eu-west-2:111122223333:key/%s", localKMSKeyID),
		}
	case <-time.After(time.Minute):
		t.Fatal("local-kms did not say it started within a minute")
		return nil
	}
}
