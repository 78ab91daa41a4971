package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PushOptions say what to push where.
type PushOptions struct {
	// URL is oci://<host>/<repository>[:<tag>]; the tag defaults to
	// DefaultTag.
	URL string
	// Dir is the directory whose files are pushed.
	Dir string
	// Source and Revision are recorded as the artifact's annotations
	// (the repository URL and revision its files came from).
	Source, Revision string
	// Created is recorded as the creation time; zero is now.
	Created time.Time
	// Insecure talks plain HTTP to the registry; Request.Auth is used.
	Insecure bool
	Request  Request
}

// Push makes a Flux artifact of opts.Dir and pushes it; it returns the
// reference pushed (host/repository:tag) and the manifest digest.
func Push(ctx context.Context, opts PushOptions) (string, string, error) {
	repoURL, tag := SplitTag(opts.URL)
	repo, err := ParseRepository(repoURL, opts.Insecure)
	if err != nil {
		return "", "", err
	}
	ref, err := name.NewTag(repo.Name()+":"+tag, nameOptions(opts.Insecure)...)
	if err != nil {
		return "", "", fmt.Errorf("%q is not a valid tag", tag)
	}
	content, err := Build(opts.Dir)
	if err != nil {
		return "", "", err
	}
	img, err := Image(content, opts)
	if err != nil {
		return "", "", err
	}
	req := opts.Request
	req.URL, req.Insecure = repoURL, opts.Insecure
	if err := remote.Write(ref, img, remoteOptions(ctx, req)...); err != nil {
		return "", "", registryError(req, "push to", err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", "", err
	}
	return ref.String(), d.String(), nil
}

// Image is the Flux artifact of a gzipped tarball made by Build.
func Image(content []byte, opts PushOptions) (v1.Image, error) {
	created := opts.Created
	if created.IsZero() {
		created = time.Now()
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content)), nil
	}, tarball.WithMediaType(ContentMediaType))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	img = mutate.Annotations(img, map[string]string{
		SourceAnnotation:   opts.Source,
		RevisionAnnotation: opts.Revision,
		CreatedAnnotation:  created.UTC().Format(time.RFC3339),
	}).(v1.Image)
	return mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: ContentMediaType})
}

// SplitTag splits oci://<host>/<repository>[:<tag>] into the repository
// URL and the tag, DefaultTag when there is none.
func SplitTag(url string) (string, string) {
	rest := strings.TrimPrefix(url, "oci://")
	slash := strings.LastIndexByte(rest, '/')
	if colon := strings.LastIndexByte(rest, ':'); colon > slash && slash >= 0 {
		return url[:len(url)-len(rest)+colon], rest[colon+1:]
	}
	return url, DefaultTag
}

func nameOptions(insecure bool) []name.Option {
	if insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// Build writes the regular files and directories under dir (not .git,
// not symbolic links, as `flux push artifact` leaves them out) into a
// gzipped tarball with names relative to dir, owner 0 and time zero, so
// that the same files make the same layer.
func Build(dir string) ([]byte, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size, h.Mode = tar.TypeReg, info.Size(), 0o644
		if info.Mode()&0o111 != 0 {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
