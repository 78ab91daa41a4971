package oci

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// PublicKeySuffix ends the name of every Secret entry read as a cosign
// public key.
const PublicKeySuffix = ".pub"

// Cosign's signature layout: a manifest tagged sha256-<hex>.sig whose
// layers are simple-signing payloads, each with its signature (base64)
// as an annotation.
const (
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	simpleSigningType   = "application/vnd.dev.cosign.simplesigning.v1+json"
	maxPayload          = 1 << 20
	maxSignatures       = 64
)

// VerificationError refuses an artifact, or says why the trusted keys
// cannot be used. Its message names the digest, the keys tried and what
// to do; it never holds key material.
type VerificationError struct{ Err error }

func (e *VerificationError) Error() string { return e.Err.Error() }
func (e *VerificationError) Unwrap() error { return e.Err }

// ParseKeys reads the cosign public keys of a Secret's data: every entry
// whose name ends in PublicKeySuffix holds one PEM public key (ECDSA,
// RSA or Ed25519, as cosign writes them). Its error names the entry,
// never its content.
func ParseKeys(secret string, data map[string][]byte) ([]PublicKey, error) {
	var names []string
	for k := range data {
		if strings.HasSuffix(k, PublicKeySuffix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, &VerificationError{Err: fmt.Errorf("trusted keys Secret %s has no *%s entry: add the cosign public key (cosign.pub)", secret, PublicKeySuffix)}
	}
	keys := make([]PublicKey, 0, len(names))
	for _, n := range names {
		block, _ := pem.Decode(data[n])
		if block == nil || block.Type != "PUBLIC KEY" {
			return nil, &VerificationError{Err: fmt.Errorf("entry %s of trusted keys Secret %s is not a PEM public key (-----BEGIN PUBLIC KEY-----)", n, secret)}
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, &VerificationError{Err: fmt.Errorf("entry %s of trusted keys Secret %s is not a public key cosign makes (ECDSA, RSA or Ed25519)", n, secret)}
		}
		keys = append(keys, PublicKey{Name: n, Key: k})
	}
	return keys, nil
}

// simpleSigning is the payload cosign signs.
type simpleSigning struct {
	Critical struct {
		Image struct {
			Digest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// Verify checks that the artifact digest of repo carries a cosign
// signature, made by one of req.Keys, of a payload naming digest. Any
// refusal is a *VerificationError naming the digest and the keys tried.
//
// With req.Root, the signature must instead be keyless: made with the key
// of a certificate that a certificate authority of req.Root issued, valid
// at the time of the check (no transparency log or timestamp proves when
// it signed), for an identity of req.Identities; the refusal names the
// identities and why each signature did not count.
func Verify(ctx context.Context, req Request, repo name.Repository, digest string) error {
	tried := make([]string, len(req.Keys))
	for i, k := range req.Keys {
		tried[i] = req.KeysSecret + "/" + k.Name
	}
	keys := "keys tried: " + strings.Join(tried, ", ")
	how := "--key <key>"
	if req.Root != nil {
		ids := make([]string, len(req.Identities))
		for i, id := range req.Identities {
			ids[i] = id.String()
		}
		keys = fmt.Sprintf("identities allowed: %s (trusted root %s)", strings.Join(ids, "; "), req.RootSecret)
		how = "a certificate of the trusted root for an allowed identity"
	}
	sigTag := repo.Tag(strings.Replace(digest, ":", "-", 1) + ".sig")
	opts := remoteOptions(ctx, req)
	img, err := remote.Image(sigTag, opts...)
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return &VerificationError{Err: fmt.Errorf("artifact %s of %s is not signed: no cosign signature (tag %s), %s; sign it with `cosign sign %s %s@%s`",
			digest, req.URL, sigTag.TagStr(), keys, how, repo.Name(), digest)}
	}
	if err != nil {
		return registryError(req, "read the signature of artifact "+digest+" from", err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return registryError(req, "read the signature of artifact "+digest+" from", err)
	}
	found := 0
	var refused []string
	for i, l := range manifest.Layers {
		if i == maxSignatures {
			break
		}
		sig, ok := l.Annotations[signatureAnnotation]
		if !ok || l.MediaType != simpleSigningType || l.Size > maxPayload {
			continue
		}
		found++
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return registryError(req, "read the signature of artifact "+digest+" from", err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			return registryError(req, "read the signature of artifact "+digest+" from", err)
		}
		payload, err := io.ReadAll(io.LimitReader(rc, maxPayload))
		rc.Close()
		if err != nil {
			return registryError(req, "read the signature of artifact "+digest+" from", err)
		}
		var p simpleSigning
		if json.Unmarshal(payload, &p) != nil || p.Critical.Image.Digest != digest {
			continue
		}
		if req.Root != nil {
			cert, err := checkCertificate(l.Annotations[certificateAnnotation], l.Annotations[chainAnnotation], req.Root, req.Identities, time.Now())
			switch {
			case l.Annotations[certificateAnnotation] == "":
				refused = append(refused, fmt.Sprintf("signature %d has no certificate (made with a key, not keyless)", found))
			case err != nil:
				refused = append(refused, fmt.Sprintf("signature %d: %v", found, err))
			case !verifySignature(cert.PublicKey, payload, raw):
				refused = append(refused, fmt.Sprintf("signature %d was not made with its certificate's key", found))
			default:
				return nil
			}
			continue
		}
		for _, k := range req.Keys {
			if verifySignature(k.Key, payload, raw) {
				return nil
			}
		}
	}
	if req.Root != nil {
		return &VerificationError{Err: fmt.Errorf("artifact %s of %s has %d cosign signature(s), none keyless by an allowed identity: %s; %s",
			digest, req.URL, found, keys, strings.Join(refused, "; "))}
	}
	return &VerificationError{Err: fmt.Errorf("artifact %s of %s has %d cosign signature(s), none by a trusted key: %s; sign it with a trusted key or add its public key to the Secret",
		digest, req.URL, found, keys)}
}

// verifySignature checks sig over payload as cosign signs with each kind
// of key: ECDSA (ASN.1) and RSA (PKCS #1 v1.5) over SHA-256, Ed25519 over
// the payload itself.
func verifySignature(key crypto.PublicKey, payload, sig []byte) bool {
	sum := sha256.Sum256(payload)
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, sum[:], sig)
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil
	case ed25519.PublicKey:
		return ed25519.Verify(k, payload, sig)
	}
	return false
}
