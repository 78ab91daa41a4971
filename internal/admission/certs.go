package admission

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Keys of the Secret that holds the serving certificate.
const (
	certKey = "tls.crt"
	keyKey  = "tls.key"
	caKey   = "ca.crt"
)

// servingCert is the webhook's certificate and the CA bundle the API
// server verifies it with.
type servingCert struct {
	tls      tls.Certificate
	leaf     *x509.Certificate
	caBundle []byte
}

// issue makes a new CA and a serving certificate it signs for hosts (DNS
// names or IP addresses), valid from now for validity. The CA's key is
// thrown away: rotation makes a new CA. The bundle holds the new CA and
// those of previousBundle still valid at now, so a replica still serving
// the previous certificate is trusted until it reloads.
func issue(hosts []string, validity time.Duration, now time.Time, previousBundle []byte) (certPEM, keyPEM, bundle []byte, err error) {
	caKeyPair, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	notBefore, notAfter := now.Add(-time.Minute), now.Add(validity)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "driftless-admission-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKeyPair.PublicKey, caKeyPair)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create the admission webhook's CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leafTmpl.IPAddresses = append(leafTmpl.IPAddresses, ip)
		} else {
			leafTmpl.DNSNames = append(leafTmpl.DNSNames, h)
		}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKeyPair)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create the admission webhook's serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return nil, nil, nil, err
	}
	bundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for _, old := range certificates(previousBundle) {
		if now.Before(old.NotAfter) {
			bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: old.Raw})...)
		}
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), bundle, nil
}

// load parses a stored certificate, key and bundle.
func load(certPEM, keyPEM, bundle []byte) (*servingCert, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if len(certificates(bundle)) == 0 {
		return nil, errors.New("no CA certificate in the bundle")
	}
	return &servingCert{tls: pair, leaf: leaf, caBundle: bundle}, nil
}

// needsRenewal reports whether a certificate must be replaced at now: it
// is in the last third of its life, or does not name every host.
func needsRenewal(leaf *x509.Certificate, hosts []string, now time.Time) bool {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if now.After(leaf.NotAfter.Add(-life / 3)) {
		return true
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
				return true
			}
		} else if !slices.Contains(leaf.DNSNames, h) {
			return true
		}
	}
	return false
}

// certificates parses the PEM certificates of a bundle, skipping others.
func certificates(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := bytes.TrimSpace(bundle); len(rest) > 0; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
			out = append(out, c)
		}
	}
	return out
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
