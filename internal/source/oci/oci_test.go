package oci_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func push(t *testing.T, reg *testenv.OCIRegistry, repo, tag string, files map[string]string) string {
	t.Helper()
	_, digest, err := oci.Push(context.Background(), oci.PushOptions{
		URL: reg.URL(repo) + ":" + tag, Dir: writeFiles(t, files), Source: "https://example.com/fleet.git", Revision: "main@sha1:0123", Insecure: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func readFile(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPushedArtifactResolvesByTagSemverAndDigestAndChecksOut(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewOCIRegistry(t, "", "")
	v1 := push(t, reg, "fleet", "1.0.0", map[string]string{"app/web.yaml": "v1", ".git/config": "x"})
	v2 := push(t, reg, "fleet", "1.2.0", map[string]string{"app/web.yaml": "v2"})
	push(t, reg, "fleet", "2.0.0", map[string]string{"app/web.yaml": "v3"})
	push(t, reg, "fleet", "not-a-version", map[string]string{"app/web.yaml": "x"})

	base := oci.Request{URL: reg.URL("fleet"), Insecure: true}
	for _, tc := range []struct {
		name string
		mut  func(*oci.Request)
		want string
	}{
		{"a tag resolves to its digest", func(r *oci.Request) { r.Tag = "1.0.0" }, "1.0.0@" + v1},
		{"a semver range takes the highest tag in range", func(r *oci.Request) { r.SemVer = ">=1.0.0 <2.0.0" }, "1.2.0@" + v2},
		{"a pinned digest is itself", func(r *oci.Request) { r.Digest = v1 }, v1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := base
			tc.mut(&req)
			rev, err := oci.Resolve(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if rev != tc.want {
				t.Fatalf("revision = %s, want %s", rev, tc.want)
			}
		})
	}

	store := &oci.Store{Dir: t.TempDir()}
	dir, err := store.Checkout(ctx, base, "1.2.0@"+v2)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "app/web.yaml"); got != "v2" {
		t.Errorf("app/web.yaml = %q, want v2", got)
	}
	dir, err = store.Checkout(ctx, base, v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		t.Error(".git was pushed")
	}

	req := base
	req.SemVer = ">=3.0.0"
	if _, err := oci.Resolve(ctx, req); err == nil || !strings.Contains(err.Error(), "1.0.0, 1.2.0, 2.0.0") {
		t.Errorf("no tag in range: error = %v, want one listing the version tags", err)
	}
}

func TestVerifyAcceptsOnlyCosignSignaturesByTrustedKeys(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewOCIRegistry(t, "", "")
	trusted, stranger := testenv.NewCosignKey(t), testenv.NewCosignKey(t)
	keys, err := oci.ParseKeys("keys", map[string][]byte{"cosign.pub": trusted.PublicPEM, "notes.txt": []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	req := oci.Request{URL: reg.URL("fleet"), Insecure: true, Keys: keys, KeysSecret: "keys"}
	store := &oci.Store{Dir: t.TempDir()}

	unsigned := push(t, reg, "fleet", "unsigned", map[string]string{"a.yaml": "a"})
	_, err = store.Checkout(ctx, req, unsigned)
	var ve *oci.VerificationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), unsigned+" of "+req.URL+" is not signed") || !strings.Contains(err.Error(), "keys/cosign.pub") {
		t.Errorf("unsigned: error = %v, want a VerificationError naming the digest and the key tried", err)
	}

	forged := push(t, reg, "fleet", "forged", map[string]string{"a.yaml": "b"})
	stranger.Sign(t, reg.Host+"/fleet", forged)
	if _, err = store.Checkout(ctx, req, forged); !errors.As(err, &ve) || !strings.Contains(err.Error(), "none by a trusted key") {
		t.Errorf("signed by a stranger: error = %v, want a VerificationError", err)
	}
	// A signature of another artifact, copied onto this one's tag.
	signed := push(t, reg, "fleet", "signed", map[string]string{"a.yaml": "c"})
	trusted.Sign(t, reg.Host+"/fleet", signed)
	if dir, err := store.Checkout(ctx, req, "signed@"+signed); err != nil || readFile(t, dir, "a.yaml") != "c" {
		t.Fatalf("signed by the trusted key: %v", err)
	}
	if entries, _ := os.ReadDir(store.Dir); len(entries) != 1 {
		t.Errorf("the store holds %d entries, want only the verified artifact", len(entries))
	}

	if _, err := oci.ParseKeys("keys", map[string][]byte{"cosign.key": []byte("secret!")}); !errors.As(err, &ve) || strings.Contains(err.Error(), "secret!") {
		t.Errorf("no *.pub: error = %v", err)
	}
	if _, err := oci.ParseKeys("keys", map[string][]byte{"bad.pub": []byte("secret!")}); !errors.As(err, &ve) || !strings.Contains(err.Error(), "bad.pub") || strings.Contains(err.Error(), "secret!") {
		t.Errorf("bad key: error = %v", err)
	}
}

// A Flux artifact as another tool (crane, flux) lays it out: names with
// "./", a config blob of Flux's media type, no annotations.
func TestArtifactInFluxLayoutMadeByAnotherToolChecksOut(t *testing.T) {
	reg := testenv.NewOCIRegistry(t, "", "")
	content := tarball(t, []entry{{name: "./", dir: true}, {name: "./deploy/", dir: true}, {name: "./deploy/cm.yaml", body: "kind: ConfigMap"}})
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, oci.ConfigMediaType)
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(content, oci.ContentMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.NewTag(reg.Host+"/flux:latest", name.Insecure)
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	req := oci.Request{URL: reg.URL("flux"), Insecure: true}
	rev, err := oci.Resolve(context.Background(), req)
	if err != nil || !strings.HasPrefix(rev, "latest@sha256:") {
		t.Fatalf("resolve = %s, %v", rev, err)
	}
	dir, err := (&oci.Store{Dir: t.TempDir()}).Checkout(context.Background(), req, rev)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "deploy/cm.yaml"); got != "kind: ConfigMap" {
		t.Errorf("deploy/cm.yaml = %q", got)
	}
}

type entry struct {
	name, body, link string
	dir, hard        bool
	global           bool              // a pax global header (no file)
	pax              map[string]string // the entry's pax records
}

func tarball(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case e.hard:
			h.Typeflag, h.Linkname = tar.TypeLink, e.link
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		case e.global:
			h = &tar.Header{Typeflag: tar.TypeXGlobalHeader}
		}
		if e.pax != nil {
			h.PAXRecords, h.Format = e.pax, tar.FormatPAX
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractRefusesEntriesThatLeaveTheArtifactOrPassItsLimits(t *testing.T) {
	limits := oci.Limits{MaxDepth: 3, MaxEntries: 5, MaxFileSize: 10, MaxTotalSize: 15}
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{"a name with ..", []entry{{name: "a/../../etc/passwd", body: "x"}}, `has a ".."`},
		{"an absolute name", []entry{{name: "/etc/passwd", body: "x"}}, "absolute name"},
		{"a link out of the artifact", []entry{{name: "a", link: "../../etc"}}, "outside the artifact"},
		{"an absolute link", []entry{{name: "a", link: "/etc/passwd"}}, "absolute path"},
		{"a link through a link to the root", []entry{{name: "s", link: "."}, {name: "l", link: "s/.."}}, "through the symbolic link"},
		{"a file under a link", []entry{{name: "l", link: "d"}, {name: "l/x", body: "x"}}, "under a symbolic link"},
		{"a hard link", []entry{{name: "a", body: "x"}, {name: "b", hard: true, link: "a"}}, "tar type"},
		{"a file too large", []entry{{name: "big", body: strings.Repeat("x", 11)}}, "limit of 10 a file"},
		{"too many bytes in all", []entry{{name: "a", body: "0123456789"}, {name: "b", body: "012345"}}, "limit of 15 bytes in all"},
		{"too deep", []entry{{name: "a/b/c/d", body: "x"}}, "4 names deep"},
		{"too many entries", []entry{{name: "1"}, {name: "2"}, {name: "3"}, {name: "4"}, {name: "5"}, {name: "6"}}, "limit of 5 entries"},
		{"too many pax global headers", slices.Repeat([]entry{{global: true, pax: map[string]string{"comment": "x"}}}, 6), "limit of 5 entries"},
		{"a pax global header past the header budget", []entry{{global: true, pax: map[string]string{"comment": strings.Repeat("x", 64<<10)}}},
			"bytes of tar headers"},
		{"a file's pax header past the header budget", []entry{{name: "a", body: "x", pax: map[string]string{"comment": strings.Repeat("x", 64<<10)}}},
			"bytes of tar headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := oci.Extract(bytes.NewReader(tarball(t, tc.entries)), t.TempDir(), limits)
			var ee *oci.EntryError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want an EntryError with %q", err, tc.want)
			}
		})
	}

	dir := t.TempDir()
	ok := []entry{{name: "d/", dir: true}, {name: "d/f", body: "x"}, {name: "l", link: "d/f"}}
	if err := oci.Extract(bytes.NewReader(tarball(t, ok)), dir, limits); err != nil {
		t.Fatalf("a link inside the artifact: %v", err)
	}
	if got := readFile(t, dir, "l"); got != "x" {
		t.Errorf("l = %q, want x", got)
	}
}

func TestPickSemver(t *testing.T) {
	for _, tc := range []struct {
		tags       []string
		want, pick string
	}{
		{[]string{"1.0.0", "v1.5.0", "1.10.0", "2.0.0", "latest"}, "1.x", "1.10.0"},
		{[]string{"1.0.0", "1.1.0-rc.1"}, ">=1.0.0", "1.0.0"},
		{[]string{"0.1.0"}, ">=1.0.0", ""},
	} {
		got, err := oci.PickSemver(tc.tags, tc.want)
		if got != tc.pick || (tc.pick == "") != (err != nil) {
			t.Errorf("PickSemver(%v, %q) = %q, %v; want %q", tc.tags, tc.want, got, err, tc.pick)
		}
	}
}
