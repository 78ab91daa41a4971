package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Store keeps the extracted files of artifacts under Dir, one directory
// per manifest digest, written once and never changed.
type Store struct {
	// Dir is the cache directory; it is created when needed.
	Dir string
	// Limits bound the files of one artifact.
	Limits Limits
}

// Checkout returns the directory holding the files of revision (as
// Resolve returns it) of req's repository, pulling and extracting the
// artifact unless the Store has it. With req.Keys, the artifact must
// carry a cosign signature by one of them, checked at every call, cached
// or not: otherwise the error is a *VerificationError and nothing is
// returned. A refused or broken artifact leaves nothing in the Store.
func (s *Store) Checkout(ctx context.Context, req Request, revision string) (string, error) {
	digest, err := DigestOf(revision)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.Dir, strings.TrimPrefix(digest, "sha256:"))
	if _, err := os.Stat(dir); err == nil {
		if err := verify(ctx, req, digest); err != nil {
			return "", err
		}
		return dir, nil
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(s.Dir, ".extract-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := Pull(ctx, req, revision, tmp, s.Limits); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // another caller extracted it first
		}
		return "", err
	}
	return dir, nil
}

func verify(ctx context.Context, req Request, digest string) error {
	if len(req.Keys) == 0 {
		return nil
	}
	repo, err := req.Repository()
	if err != nil {
		return err
	}
	return Verify(ctx, req, repo, digest)
}

// Pull extracts the files of revision of req's repository into dir, an
// empty directory, once its signature is verified when req.Keys is set
// (else the error is a *VerificationError and nothing is written). On
// any error dir may hold part of the files: the caller removes them.
func Pull(ctx context.Context, req Request, revision, dir string, limits Limits) error {
	digest, err := DigestOf(revision)
	if err != nil {
		return err
	}
	repo, err := req.Repository()
	if err != nil {
		return err
	}
	if err := verify(ctx, req, digest); err != nil {
		return err
	}
	opts := remoteOptions(ctx, req)
	img, err := remote.Image(repo.Digest(digest), opts...)
	if err != nil {
		return registryError(req, "pull artifact "+digest+" from", err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return registryError(req, "read the manifest of artifact "+digest+" in", err)
	}
	layer, err := contentLayer(manifest)
	if err != nil {
		return fmt.Errorf("%s: artifact %s %w", req.URL, digest, err)
	}
	if limits.MaxTotalSize > 0 && layer.Size > limits.MaxTotalSize {
		return fmt.Errorf("%s: artifact %s has a layer of %d bytes, past the limit of %d", req.URL, digest, layer.Size, limits.MaxTotalSize)
	}
	l, err := img.LayerByDigest(layer.Digest)
	if err != nil {
		return registryError(req, "pull the layer of artifact "+digest+" from", err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return registryError(req, "pull the layer of artifact "+digest+" from", err)
	}
	defer rc.Close()
	// go-containerregistry checks the layer's digest at its end: a
	// tampered layer fails Extract.
	if err := Extract(rc, dir, limits); err != nil {
		var ee *EntryError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s: artifact %s: %w", req.URL, Short(revision), err)
		}
		return fmt.Errorf("%s: artifact %s: pull failed: %w", req.URL, Short(revision), err)
	}
	return nil
}

// contentLayer is the layer of a Flux artifact's files.
func contentLayer(m *v1.Manifest) (v1.Descriptor, error) {
	var seen []string
	for _, l := range m.Layers {
		if l.MediaType == ContentMediaType {
			return l, nil
		}
		seen = append(seen, string(l.MediaType))
	}
	return v1.Descriptor{}, fmt.Errorf("has no layer of media type %s (its layers: %s): push it with `driftless push artifact` or `flux push artifact`",
		ContentMediaType, strings.Join(append(seen, "none")[:max(len(seen), 1)], ", "))
}
