package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

func TestPushArtifactMakesAFluxArtifactAndPrintsItsDigest(t *testing.T) {
	reg := testenv.NewOCIRegistry(t, "", "")
	dir := t.TempDir()
	for p, content := range map[string]string{"deploy/web.yaml": "kind: ConfigMap", ".git/HEAD": "ref"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := runCLI(t, "push", "artifact", reg.URL("fleet")+":v1", "--path", dir, "--source", "https://example.com/fleet.git",
		"--revision", "main@sha1:0123456789abcdef", "--insecure").expect(t, 0)
	digest := strings.TrimSpace(res.out)
	if !strings.HasPrefix(digest, "sha256:") || !strings.Contains(res.errOut, "pushed "+reg.Host+"/fleet:v1") {
		t.Fatalf("stdout %q, stderr %q: want the digest and what was pushed", res.out, res.errOut)
	}

	// The layout flux pull artifact reads.
	ref, _ := name.NewDigest(reg.Host+"/fleet@"+digest, name.Insecure)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != oci.ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != oci.ContentMediaType {
		t.Errorf("config %s, layers %v: want Flux's media types", m.Config.MediaType, m.Layers)
	}
	for k, want := range map[string]string{oci.SourceAnnotation: "https://example.com/fleet.git", oci.RevisionAnnotation: "main@sha1:0123456789abcdef"} {
		if m.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], want)
		}
	}
	if m.Annotations[oci.CreatedAnnotation] == "" {
		t.Errorf("no annotation %s", oci.CreatedAnnotation)
	}

	req := oci.Request{URL: reg.URL("fleet"), Tag: "v1", Insecure: true}
	rev, err := oci.Resolve(context.Background(), req)
	if err != nil || rev != "v1@"+digest {
		t.Fatalf("resolve = %s, %v; want v1@%s", rev, err, digest)
	}
	out, err := (&oci.Store{Dir: t.TempDir()}).Checkout(context.Background(), req, rev)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "deploy/web.yaml")); err != nil || string(b) != "kind: ConfigMap" {
		t.Errorf("deploy/web.yaml = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(out, ".git")); err == nil {
		t.Error(".git was pushed")
	}

	runCLI(t, "push", "artifact", reg.URL("fleet"), "--path", dir, "--insecure").expect(t, 2)
}
