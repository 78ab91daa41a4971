package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Store keeps the extracted files of artifacts under Dir, one directory
// per manifest digest, written once and never changed until Remove
// takes it away. A digest is not a secret: a cached artifact is served
// only to a request whose repository, read with its credentials, serves
// that manifest (a HEAD by digest, remembered per repository,
// credentials and digest as the chart cache keys its charts: ScopeKey).
type Store struct {
	// Dir is the cache directory; it is created when needed.
	Dir string
	// Limits bound the files of one artifact.
	Limits Limits
	// AfterExtract, when set, is called after an artifact was pulled and
	// extracted into the Store (a cache bound runs then).
	AfterExtract func()

	mu sync.Mutex
	// held counts the readers of each directory (by its name, the
	// digest's hex): Remove leaves a held directory alone.
	held map[string]int
	// proven holds the proofKeys of requests whose repository served a
	// digest with their credentials.
	proven map[string]bool
}

// maxProofs bounds Store.proven: past it, the proofs are forgotten and
// made again.
const maxProofs = 4096

// Checkout returns the directory holding the files of revision (as
// Resolve returns it) of req's repository, pulling and extracting the
// artifact unless the Store has it. With req.Keys, the artifact must
// carry a cosign signature by one of them, checked at every call, cached
// or not: otherwise the error is a *VerificationError and nothing is
// returned. A refused or broken artifact leaves nothing in the Store.
// The directory is not held: see Open.
func (s *Store) Checkout(ctx context.Context, req Request, revision string) (string, error) {
	dir, release, err := s.Open(ctx, req, revision)
	if err != nil {
		return "", err
	}
	release()
	return dir, nil
}

// Open is Checkout that holds the directory until release is called:
// Remove never takes a held directory away. Each Open marks the
// directory used now (its modification time), for Entries.
func (s *Store) Open(ctx context.Context, req Request, revision string) (dir string, release func(), err error) {
	digest, err := DigestOf(revision)
	if err != nil {
		return "", nil, err
	}
	name := strings.TrimPrefix(digest, "sha256:")
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]int{}
	}
	s.held[name]++
	s.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held[name]--; s.held[name] <= 0 {
				delete(s.held, name)
			}
		})
	}
	dir, extracted, err := s.checkout(ctx, req, revision, digest)
	if err != nil {
		release()
		return "", nil, err
	}
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	if extracted && s.AfterExtract != nil {
		s.AfterExtract()
	}
	return dir, release, nil
}

// checkout is Checkout of an artifact the caller holds; extracted says
// whether it was pulled now.
func (s *Store) checkout(ctx context.Context, req Request, revision, digest string) (string, bool, error) {
	dir := filepath.Join(s.Dir, strings.TrimPrefix(digest, "sha256:"))
	if _, err := os.Stat(dir); err == nil {
		if err := s.prove(ctx, req, digest); err != nil {
			return "", false, err
		}
		if err := verify(ctx, req, digest); err != nil {
			return "", false, err
		}
		return dir, false, nil
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return "", false, err
	}
	tmp, err := os.MkdirTemp(s.Dir, ".extract-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp)
	if err := Pull(ctx, req, revision, tmp, s.Limits); err != nil {
		return "", false, err
	}
	s.remember(req, digest)
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, false, nil // another caller extracted it first
		}
		return "", false, err
	}
	return dir, true, nil
}

// prove returns nil when req's repository, read with req's credentials,
// serves the manifest digest: asked once (a HEAD by digest), then
// remembered. Its error is the registry's refusal, as a pull's would be.
func (s *Store) prove(ctx context.Context, req Request, digest string) error {
	if key, ok := proofKey(req, digest); ok {
		s.mu.Lock()
		done := s.proven[key]
		s.mu.Unlock()
		if done {
			return nil
		}
	}
	repo, err := req.Repository()
	if err != nil {
		return err
	}
	if _, err := remote.Head(repo.Digest(digest), remoteOptions(ctx, req)...); err != nil {
		return registryError(req, "read artifact "+digest+" in", err)
	}
	s.remember(req, digest)
	return nil
}

// remember records that req's repository served digest with req's
// credentials.
func (s *Store) remember(req Request, digest string) {
	key, ok := proofKey(req, digest)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proven == nil || len(s.proven) >= maxProofs {
		s.proven = map[string]bool{}
	}
	s.proven[key] = true
}

// proofKey is the ScopeKey of req's repository and credentials and the
// digest; ok is false when the credentials cannot be read (nothing is
// remembered then).
func proofKey(req Request, digest string) (string, bool) {
	var c authn.AuthConfig
	if req.Auth != nil {
		ac, err := req.Auth.Authorization()
		if err != nil {
			return "", false
		}
		c = *ac
	}
	source := fmt.Sprintf("oci=%s insecure=%t digest=%s", strings.TrimSuffix(req.URL, "/"), req.Insecure, digest)
	return ScopeKey(source, []byte(c.Username), []byte(c.Password), []byte(c.Auth), []byte(c.IdentityToken), []byte(c.RegistryToken)), true
}

// ScopeKey names what one source, read with one set of credentials, may
// find in a cache (the chart cache's directories, the Store's proofs): a
// digest of source and each secret, from which none can be read back.
func ScopeKey(source string, secrets ...[]byte) string {
	h := sha256.New()
	for _, part := range append([][]byte{[]byte(source)}, secrets...) {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// Entry is an extracted artifact in a Store, as a cache bound sees it.
type Entry struct {
	// Dir holds its files.
	Dir string
	// LastUse is when it was last opened.
	LastUse time.Time
}

// Entries lists the extracted artifacts of the Store, held or not
// (partial extractions under way are not listed).
func (s *Store) Entries() []Entry {
	des, _ := os.ReadDir(s.Dir)
	var entries []Entry
	for _, de := range des {
		if !de.IsDir() || len(de.Name()) != 64 || strings.Trim(de.Name(), "0123456789abcdef") != "" {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		entries = append(entries, Entry{Dir: filepath.Join(s.Dir, de.Name()), LastUse: info.ModTime()})
	}
	return entries
}

// abandonedAfter is how old an extraction's temporary directory must be
// for Sweep to take it for one a crash left: a pull is bounded by its
// Sync's timeout, far shorter.
const abandonedAfter = time.Hour

// Sweep deletes what a crashed agent left in the Store: an artifact taken
// away by Remove but not yet deleted (.remove-*), and a partial extraction
// older than an hour (.extract-*). Neither is read by anyone. It returns
// how many it deleted.
func (s *Store) Sweep(now time.Time) int {
	des, _ := os.ReadDir(s.Dir)
	n := 0
	for _, de := range des {
		name := de.Name()
		if !de.IsDir() || !strings.HasPrefix(name, ".remove-") && !strings.HasPrefix(name, ".extract-") {
			continue
		}
		if strings.HasPrefix(name, ".extract-") {
			info, err := de.Info()
			if err != nil || now.Sub(info.ModTime()) < abandonedAfter {
				continue
			}
		}
		if os.RemoveAll(filepath.Join(s.Dir, name)) == nil {
			n++
		}
	}
	return n
}

// Remove deletes the extracted artifact in dir (an Entry's) unless a
// reader holds it or opened it after cutoff; it reports whether dir is
// gone. An artifact removed is pulled again when next opened.
func (s *Store) Remove(dir string, cutoff time.Time) bool {
	name := filepath.Base(dir)
	if filepath.Join(s.Dir, name) != filepath.Clean(dir) {
		return false
	}
	gone := filepath.Join(s.Dir, ".remove-"+name)
	if !s.takeAway(name, dir, gone, cutoff) {
		return false
	}
	_ = os.RemoveAll(gone)
	return true
}

// takeAway moves dir to gone unless it is held or was opened after
// cutoff: an Open that comes after finds no part of it, and pulls it
// again.
func (s *Store) takeAway(name, dir, gone string, cutoff time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[name] > 0 {
		return false
	}
	if info, err := os.Stat(dir); err != nil || info.ModTime().After(cutoff) {
		return false
	}
	return os.Rename(dir, gone) == nil
}

func verify(ctx context.Context, req Request, digest string) error {
	if !req.verifies() {
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
