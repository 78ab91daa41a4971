package oci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	gcrtarball "github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

// TestPushedArtifactPassesEveryCheckOfFluxPull holds an artifact of
// oci.Push (driftless push artifact) to each thing `flux pull artifact`
// (fluxcd/pkg oci Client.Pull, then tar.Untar with symbolic links
// skipped) checks or reads, one subtest each.
func TestPushedArtifactPassesEveryCheckOfFluxPull(t *testing.T) {
	reg := testenv.NewOCIRegistry(t, "", "")
	created := time.Date(2026, 11, 30, 9, 12, 3, 0, time.UTC)
	dir := testenv.WriteFiles(t, map[string]string{"deploy/web.yaml": "kind: ConfigMap\n", "deploy/nested/x.yaml": "x: 1\n", "README.md": "r"})
	if err := os.Symlink("web.yaml", filepath.Join(dir, "deploy", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	_, digest, err := oci.Push(context.Background(), oci.PushOptions{URL: reg.URL("fleet") + ":v1", Dir: dir,
		Source: "https://github.com/org/fleet", Revision: "main@sha1:4f1c2a9e0b7d3c6a5e8f9a1b2c3d4e5f60718293", Created: created, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	// crane.Pull is remote.Image of the reference.
	ref, err := name.ParseReference(reg.Host+"/fleet:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("crane.Pull would fail: %v", err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != digest {
		t.Fatalf("the tag names %s, push printed %s", d, digest)
	}

	t.Run("the manifest is an OCI image manifest, which crane.Pull reads", func(t *testing.T) {
		if m.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest media type %s, want %s", m.MediaType, types.OCIManifestSchema1)
		}
	})
	t.Run("the config has flux push's media type", func(t *testing.T) {
		if m.Config.MediaType != oci.ConfigMediaType {
			t.Errorf("config media type %s, want %s", m.Config.MediaType, oci.ConfigMediaType)
		}
	})
	t.Run("there is at least one layer and layer 0, the one Pull reads, is the content", func(t *testing.T) {
		if len(m.Layers) != 1 || m.Layers[0].MediaType != oci.ContentMediaType {
			t.Errorf("layers %v, want one of media type %s", m.Layers, oci.ContentMediaType)
		}
	})
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("layers: %v", err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	blob, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("layer 0 starts with the gzip magic bytes, so Pull untars it instead of copying it as one file", func(t *testing.T) {
		if !bytes.HasPrefix(blob, []byte{0x1f, 0x8b}) {
			t.Errorf("layer 0 starts with % x", blob[:min(len(blob), 2)])
		}
	})
	t.Run("Untar accepts every entry: a relative name without a backslash or ../, a file or a directory", func(t *testing.T) {
		gz, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			t.Fatalf("Untar needs a gzip body: %v", err)
		}
		tr := tar.NewReader(gz)
		var files []string
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Untar would fail: tar error: %v", err)
			}
			if h.Name == "" || strings.Contains(h.Name, `\`) || strings.HasPrefix(h.Name, "/") || strings.Contains(h.Name, "../") {
				t.Errorf("entry %q: Untar refuses the name", h.Name)
			}
			switch mode := h.FileInfo().Mode(); {
			case mode.IsRegular():
				files = append(files, h.Name)
			case mode.IsDir():
			default:
				t.Errorf("entry %q of mode %v: Untar refuses it, or skips a symbolic link", h.Name, mode)
			}
		}
		if got := strings.Join(files, " "); got != "README.md deploy/nested/x.yaml deploy/web.yaml" {
			t.Errorf("files %s, want README.md deploy/nested/x.yaml deploy/web.yaml", got)
		}
	})
	t.Run("the annotations give what flux pull prints: source, revision and created in RFC 3339", func(t *testing.T) {
		want := map[string]string{
			oci.SourceAnnotation:   "https://github.com/org/fleet",
			oci.RevisionAnnotation: "main@sha1:4f1c2a9e0b7d3c6a5e8f9a1b2c3d4e5f60718293",
			oci.CreatedAnnotation:  "2026-11-30T09:12:03Z",
		}
		for k, v := range want {
			if m.Annotations[k] != v {
				t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
			}
		}
	})
}

// TestArtifactAsFluxPushWritesItChecksOut reads an artifact made the way
// `flux push artifact` makes it (fluxcd/pkg oci Client.Push and tar.Tar):
// a tarball of the directory with its root as entry ".", directories
// without a trailing slash, the files' own modes, owners and times
// zeroed, written to a file and made a layer of the content media type;
// the config's creation time set; the annotations; pushed as crane does.
func TestArtifactAsFluxPushWritesItChecksOut(t *testing.T) {
	reg := testenv.NewOCIRegistry(t, "", "")
	src := testenv.WriteFiles(t, map[string]string{"deploy/cm.yaml": "kind: ConfigMap\n", "deploy/base/kustomization.yaml": "resources: []\n"})
	if err := os.Chmod(filepath.Join(src, "deploy", "cm.yaml"), 0o640); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "artifact.tgz")
	fluxTar(t, src, archive)
	layer, err := gcrtarball.LayerFromFile(archive, gcrtarball.WithMediaType(oci.ContentMediaType), gcrtarball.WithCompressedCaching)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC().Truncate(time.Second)
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, oci.ConfigMediaType)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Created = v1.Time{Time: created}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	img = mutate.Annotations(img, map[string]string{
		oci.CreatedAnnotation:  created.Format(time.RFC3339),
		oci.SourceAnnotation:   "https://github.com/org/fleet",
		oci.RevisionAnnotation: "main@sha1:4f1c2a9e0b7d3c6a5e8f9a1b2c3d4e5f60718293",
	}).(v1.Image)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer}); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(reg.Host+"/flux-made:1.0.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}

	req := oci.Request{URL: reg.URL("flux-made"), SemVer: "1.x", Insecure: true}
	rev, err := oci.Resolve(context.Background(), req)
	if d, _ := img.Digest(); err != nil || rev != "1.0.0@"+d.String() {
		t.Fatalf("resolve = %s, %v; want 1.0.0@%s", rev, err, d)
	}
	dir, err := (&oci.Store{Dir: t.TempDir()}).Checkout(context.Background(), req, rev)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"deploy/cm.yaml": "kind: ConfigMap\n", "deploy/base/kustomization.yaml": "resources: []\n"} {
		if got := readFile(t, dir, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
}

// fluxTar writes dir as fluxcd/pkg's tar.Tar does into the file archive:
// every directory (the root too, as ".") and regular file in walk order,
// headers from the files' own information with owners and times zeroed.
func fluxTar(t *testing.T, dir, archive string) {
	t.Helper()
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || (!d.Type().IsRegular() && !d.IsDir()) {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil || !info.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}
