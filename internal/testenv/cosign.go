package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CosignKey is an ECDSA P-256 key pair, as `cosign generate-key-pair`
// makes one; PublicPEM is what cosign.pub holds.
type CosignKey struct {
	Private   *ecdsa.PrivateKey
	PublicPEM []byte
}

// NewCosignKey makes a key pair.
func NewCosignKey(t testing.TB) CosignKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return CosignKey{Private: k, PublicPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})}
}

// Sign pushes a cosign signature of the artifact digest in repository
// (host/path) by k, in the layout `cosign sign --key` writes: a manifest
// tagged sha256-<hex>.sig with a simple-signing payload layer carrying
// its signature as an annotation.
func (k CosignKey) Sign(t testing.TB, repository, digest string) {
	t.Helper()
	repo, err := name.NewRepository(repository, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	payload := fmt.Appendf(nil, `{"critical":{"identity":{"docker-reference":%q},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`,
		repo.Name(), digest)
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, k.Private, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(payload, "application/vnd.dev.cosign.simplesigning.v1+json"),
		Annotations: map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		t.Fatal(err)
	}
	tag := repo.Tag(strings.Replace(digest, ":", "-", 1) + ".sig")
	if err := remote.Write(tag, img); err != nil {
		t.Fatalf("push signature %s: %v", tag, err)
	}
}

// CosignCLI returns the cosign CLI that `make cosign` builds into
// bin/tools/cosign (or DRIFTLESS_COSIGN_BIN), or ends the test with
// MissingTool.
func CosignCLI(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("DRIFTLESS_COSIGN_BIN")
	if bin == "" {
		bin = filepath.Join(moduleRoot(t), "bin", "tools", "cosign")
	}
	if _, err := os.Stat(bin); err != nil {
		MissingTool(t, "the cosign CLI is not at %s: run make cosign (or set DRIFTLESS_COSIGN_BIN) to test signatures made by cosign", bin)
	}
	return bin
}

// CosignRunner returns a fresh directory and a function that runs the
// real cosign CLI (CosignCLI) in it, with that directory as its home and
// TUF root and "pw" as the password of the key pairs it makes; a failed
// run ends the test with cosign's output.
func CosignRunner(t testing.TB) (dir string, run func(args ...string)) {
	t.Helper()
	cosign := CosignCLI(t)
	dir = t.TempDir()
	env := append(os.Environ(), "COSIGN_PASSWORD=pw", "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, "tuf"))
	return dir, func(args ...string) {
		t.Helper()
		cmd := exec.Command(cosign, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
