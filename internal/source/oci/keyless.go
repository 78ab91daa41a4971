package oci

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// TrustedRootKey is the Secret entry holding a Sigstore trusted root
// (trusted_root.json, as `cosign trusted-root create` writes it).
const TrustedRootKey = "trusted_root.json"

// Where cosign keeps the certificate of a keyless signature: annotations
// of the signature's layer, in PEM.
const (
	certificateAnnotation = "dev.sigstore.cosign/certificate"
	chainAnnotation       = "dev.sigstore.cosign/chain"
)

// The Fulcio certificate extensions naming the OIDC issuer: the first
// holds the raw string, the second a DER UTF8String.
var (
	oidIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}
	oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}
)

// Identity is who must have signed a keyless signature: regular
// expressions that must match the whole OIDC issuer and the whole
// subject (an email address or URI) of the signing certificate.
type Identity struct {
	Issuer, Subject *regexp.Regexp
}

func (id Identity) String() string {
	return "issuer `" + unanchor(id.Issuer) + "` subject `" + unanchor(id.Subject) + "`"
}

func unanchor(r *regexp.Regexp) string {
	return strings.TrimSuffix(strings.TrimPrefix(r.String(), `^(?:`), `)$`)
}

// ParseIdentity compiles an issuer and a subject pattern; each must
// match the whole value. A pattern must be a regular expression on its
// own before it is anchored, so none can close the anchors' group (x)|(.*
// is refused, not read as "starts with x, or anything").
func ParseIdentity(issuer, subject string) (Identity, error) {
	i, err := wholeMatch(issuer)
	if err != nil {
		return Identity{}, fmt.Errorf("issuer %q is not a regular expression: %v", issuer, err)
	}
	s, err := wholeMatch(subject)
	if err != nil {
		return Identity{}, fmt.Errorf("subject %q is not a regular expression: %v", subject, err)
	}
	return Identity{Issuer: i, Subject: s}, nil
}

// wholeMatch compiles pattern alone, then anchored at both ends.
func wholeMatch(pattern string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, err
	}
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// TrustedRoot is the certificate authorities of a Sigstore trusted root
// (its certificateAuthorities; transparency logs and timestamp
// authorities are not read).
type TrustedRoot struct {
	CAs []CertificateAuthority
}

// CertificateAuthority is one Fulcio instance: its root and
// intermediates, and when it issued certificates.
type CertificateAuthority struct {
	URI           string
	Root          *x509.Certificate
	Intermediates []*x509.Certificate
	Start, End    time.Time // End is zero when open
}

// ParseTrustedRoot reads trusted_root.json (the Sigstore TrustedRoot
// message in JSON). Its error says what is missing, never a key.
func ParseTrustedRoot(data []byte) (*TrustedRoot, error) {
	var doc struct {
		CertificateAuthorities []struct {
			URI       string `json:"uri"`
			CertChain struct {
				Certificates []struct {
					RawBytes []byte `json:"rawBytes"`
				} `json:"certificates"`
			} `json:"certChain"`
			ValidFor struct {
				Start time.Time  `json:"start"`
				End   *time.Time `json:"end"`
			} `json:"validFor"`
		} `json:"certificateAuthorities"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a Sigstore trusted root (JSON): %v", err)
	}
	root := &TrustedRoot{}
	for i, ca := range doc.CertificateAuthorities {
		certs := ca.CertChain.Certificates
		if len(certs) == 0 {
			return nil, fmt.Errorf("certificateAuthorities[%d] (%s) has no certChain.certificates", i, ca.URI)
		}
		c := CertificateAuthority{URI: ca.URI, Start: ca.ValidFor.Start}
		if ca.ValidFor.End != nil {
			c.End = *ca.ValidFor.End
		}
		for j, raw := range certs {
			cert, err := x509.ParseCertificate(raw.RawBytes)
			if err != nil {
				return nil, fmt.Errorf("certificateAuthorities[%d].certChain.certificates[%d] (%s) is not a DER certificate: %v", i, j, ca.URI, err)
			}
			if j == len(certs)-1 {
				c.Root = cert
			} else {
				c.Intermediates = append(c.Intermediates, cert)
			}
		}
		root.CAs = append(root.CAs, c)
	}
	if len(root.CAs) == 0 {
		return nil, fmt.Errorf("no certificateAuthorities: keyless signatures need the Fulcio certificate authority that issued their certificates")
	}
	return root, nil
}

// checkCertificate says why the PEM certificate of a keyless signature
// does not count, or returns its public key: it must chain to a
// certificate authority of root that was valid then, be valid itself at
// now, be for code signing, and name an issuer and a subject one of ids
// matches.
func checkCertificate(certPEM, chainPEM string, root *TrustedRoot, ids []Identity, now time.Time) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		return nil, fmt.Errorf("its certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("its certificate does not parse: %v", err)
	}
	issuer, subjects := certIssuer(cert), certSubjects(cert)
	who := fmt.Sprintf("issuer %q subject %q", issuer, strings.Join(subjects, ", "))
	// The chain the signature carries may add intermediates; trust
	// comes from the trusted root's certificates alone.
	var carried []*x509.Certificate
	for rest := []byte(chainPEM); ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			carried = append(carried, c)
		}
	}
	chained := false
	var chainErr error
	for _, ca := range root.CAs {
		if now.Before(ca.Start) || (!ca.End.IsZero() && now.After(ca.End)) {
			continue
		}
		roots, inter := x509.NewCertPool(), x509.NewCertPool()
		roots.AddCert(ca.Root)
		for _, c := range append(ca.Intermediates, carried...) {
			inter.AddCert(c)
		}
		_, chainErr = cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}})
		if chainErr == nil {
			chained = true
			break
		}
	}
	if !chained {
		if chainErr != nil {
			return nil, fmt.Errorf("its certificate (%s) is not one the trusted root's certificate authorities issued and that is valid now: %v", who, chainErr)
		}
		return nil, fmt.Errorf("its certificate (%s) is not one the trusted root's certificate authorities issued: none is valid now", who)
	}
	for _, id := range ids {
		if !id.Issuer.MatchString(issuer) {
			continue
		}
		for _, s := range subjects {
			if id.Subject.MatchString(s) {
				return cert, nil
			}
		}
	}
	return nil, fmt.Errorf("its certificate names %s, which no matchOIDCIdentity matches", who)
}

// certIssuer is the OIDC issuer Fulcio recorded in cert, or "".
func certIssuer(cert *x509.Certificate) string {
	for _, e := range cert.Extensions {
		switch {
		case e.Id.Equal(oidIssuerV2):
			var s string
			if _, err := asn1.UnmarshalWithParams(e.Value, &s, "utf8"); err == nil {
				return s
			}
		case e.Id.Equal(oidIssuerV1):
			return string(e.Value)
		}
	}
	return ""
}

// certSubjects are the identities cert is for: its email addresses and
// URIs.
func certSubjects(cert *x509.Certificate) []string {
	subjects := append([]string(nil), cert.EmailAddresses...)
	for _, u := range cert.URIs {
		subjects = append(subjects, u.String())
	}
	return subjects
}
