package oci_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

// fulcio is a throwaway certificate authority standing in for Fulcio:
// a self-signed root that issues code-signing certificates with the
// OIDC issuer extension Fulcio writes.
type fulcio struct {
	root *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newFulcio(t *testing.T, name string) fulcio {
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
	return fulcio{root: root, key: key}
}

// issue makes the certificate Fulcio would give the holder of pub who
// signed in at issuer as email.
func (f fulcio) issue(t *testing.T, pub crypto.PublicKey, issuer, email string) []byte {
	t.Helper()
	value, err := asn1.MarshalWithParams(issuer, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}, EmailAddresses: []string{email},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: value}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.root, pub, f.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// trustedRoot is the trusted_root.json naming f as the only certificate
// authority.
func (f fulcio) trustedRoot(t *testing.T) *oci.TrustedRoot {
	t.Helper()
	doc := map[string]any{
		"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		"certificateAuthorities": []any{map[string]any{
			"subject":   map[string]string{"organization": "sigstore.test", "commonName": f.root.Subject.CommonName},
			"uri":       "https://fulcio.test",
			"certChain": map[string]any{"certificates": []any{map[string][]byte{"rawBytes": f.root.Raw}}},
			"validFor":  map[string]string{"start": f.root.NotBefore.UTC().Format(time.RFC3339)},
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	root, err := oci.ParseTrustedRoot(b)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestKeylessSignaturesOfTheRealCosignCLIAreCheckedAgainstTheTrustedRootAndIdentity(t *testing.T) {
	const issuer, subject = "https://token.actions.githubusercontent.com", "release@example.com"
	cosign := testenv.CosignCLI(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	digest := push(t, reg, "fleet", "1.0.0", map[string]string{"a.yaml": "a"})
	dir := t.TempDir()
	env := append(os.Environ(), "COSIGN_PASSWORD=pw", "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, "tuf"))
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(cosign, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("generate-key-pair")
	pubPEM, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pubPEM)
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ca := newFulcio(t, "fulcio-stand-in")
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cert.pem", ca.issue(t, pub, issuer, subject))
	write("chain.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.root.Raw}))
	run("sign", "--key", "cosign.key", "--certificate", "cert.pem", "--certificate-chain", "chain.pem", "--tlog-upload=false",
		"--allow-http-registry", "--allow-insecure-registry", "-y", reg.Host+"/fleet@"+digest)

	repo, err := oci.ParseRepository(reg.URL("fleet"), true)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(root *oci.TrustedRoot, iss, sub string) error {
		id, err := oci.ParseIdentity(iss, sub)
		if err != nil {
			t.Fatal(err)
		}
		req := oci.Request{URL: reg.URL("fleet"), Insecure: true, Root: root, Identities: []oci.Identity{id}, RootSecret: "sigstore-root"}
		return oci.Verify(context.Background(), req, repo, digest)
	}
	if err := verify(ca.trustedRoot(t), issuer, subject); err != nil {
		t.Fatalf("the signature of the allowed identity is refused: %v", err)
	}
	if err := verify(ca.trustedRoot(t), `https://token\.actions\.githubusercontent\.com`, `.*@example\.com`); err != nil {
		t.Fatalf("patterns matching the identity are refused: %v", err)
	}
	for _, tt := range []struct {
		name         string
		root         *oci.TrustedRoot
		issuer, subj string
		want         []string
	}{
		{"another subject", ca.trustedRoot(t), issuer, "someone@example.com",
			[]string{`subject "someone@example.com"`, `names issuer "` + issuer + `" subject "` + subject + `", which no matchOIDCIdentity matches`}},
		{"another issuer", ca.trustedRoot(t), "https://accounts.google.com", subject,
			[]string{`issuer "https://accounts.google.com"`, "which no matchOIDCIdentity matches"}},
		{"a subject the pattern only contains", ca.trustedRoot(t), issuer, "release@example",
			[]string{"which no matchOIDCIdentity matches"}},
		{"a certificate of another certificate authority", newFulcio(t, "another-ca").trustedRoot(t), issuer, subject,
			[]string{"is not one the trusted root's certificate authorities issued", "certificate signed by unknown authority"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := verify(tt.root, tt.issuer, tt.subj)
			var ve *oci.VerificationError
			if !errors.As(err, &ve) {
				t.Fatalf("verify = %v, want a VerificationError", err)
			}
			for _, want := range append(tt.want, "artifact "+digest, "trusted root sigstore-root") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q:\n%s", want, err)
				}
			}
		})
	}
}
