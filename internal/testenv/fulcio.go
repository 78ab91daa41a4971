package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Fulcio is a throwaway certificate authority standing in for Sigstore's
// Fulcio: a self-signed root that issues code-signing certificates with
// the OIDC issuer extension Fulcio writes (1.3.6.1.4.1.57264.1.8) and the
// signer's email address.
type Fulcio struct {
	Root *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewFulcio makes a certificate authority named name, valid from an hour
// ago for a day.
func NewFulcio(t testing.TB, name string) *Fulcio {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name, Organization: []string{"sigstore.test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Fulcio{Root: root, key: key}
}

// Issue returns the PEM certificate Fulcio would give the holder of pub
// who signed in at issuer as subject (an email address, or a URI such
// as a CI workflow's), valid for an hour.
func (f *Fulcio) Issue(t testing.TB, pub crypto.PublicKey, issuer, subject string) []byte {
	t.Helper()
	value, err := asn1.MarshalWithParams(issuer, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: value}}}
	if u, err := url.Parse(subject); err == nil && u.Scheme != "" {
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{subject}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.Root, pub, f.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TrustedRoot is a Sigstore trusted_root.json naming f as its only
// certificate authority (no transparency log, no timestamp authority).
func (f *Fulcio) TrustedRoot(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		"certificateAuthorities": []any{map[string]any{
			"subject":   map[string]string{"organization": "sigstore.test", "commonName": f.Root.Subject.CommonName},
			"uri":       "https://fulcio.test",
			"certChain": map[string]any{"certificates": []any{map[string][]byte{"rawBytes": f.Root.Raw}}},
			"validFor":  map[string]string{"start": f.Root.NotBefore.UTC().Format(time.RFC3339)},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SignWithCosign signs ref (host/path@sha256:…) keyless as `cosign sign`
// does with a certificate from f for issuer and subject (see Issue): the real cosign
// CLI (CosignCLI) with a fresh key pair, the certificate and f's root as
// its chain, and no transparency log upload.
func (f *Fulcio) SignWithCosign(t testing.TB, ref, issuer, subject string) {
	t.Helper()
	dir, run := CosignRunner(t)
	run("generate-key-pair")
	pubPEM, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pubPEM)
	if block == nil {
		t.Fatal("cosign.pub is not PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"cert.pem": f.Issue(t, pub, issuer, subject), "chain.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Root.Raw})} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run("sign", "--key", "cosign.key", "--certificate", "cert.pem", "--certificate-chain", "chain.pem", "--tlog-upload=false",
		"--allow-http-registry", "--allow-insecure-registry", "-y", ref)
}
