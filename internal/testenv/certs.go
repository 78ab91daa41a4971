package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of keys and certificates a local control plane needs:
// a CA, the API server's serving certificate, an admin client certificate
// in system:masters, and the service-account signing key.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// ensure creates any missing file of the set. Existing files are kept so
// that a restarted local cluster keeps trusting its old kubeconfig.
func (p pki) ensure() error {
	if _, err := os.Stat(p.path("ca.crt")); err == nil {
		return nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "driftless-local-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, caCert, err := sign(caTmpl, caKey, nil, nil)
	if err != nil {
		return fmt.Errorf("CA certificate: %w", err)
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "driftless-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	files := map[string][]byte{"ca.crt": pemBlock("CERTIFICATE", caDER)}
	caKeyDER, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return err
	}
	files["ca.key"] = pemBlock("PRIVATE KEY", caKeyDER)
	for name, tmpl := range map[string]*x509.Certificate{"apiserver": serving, "admin": admin} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, _, err := sign(tmpl, key, caCert, caKey)
		if err != nil {
			return fmt.Errorf("%s certificate: %w", name, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		files[name+".crt"] = pemBlock("CERTIFICATE", der)
		files[name+".key"] = pemBlock("PRIVATE KEY", keyDER)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files["sa.key"] = pemBlock("PRIVATE KEY", saDER)
	files["sa.pub"] = pemBlock("PUBLIC KEY", saPub)
	// ca.crt last: its presence marks the set as complete.
	var errs []error
	for name, data := range files {
		if name == "ca.crt" {
			continue
		}
		errs = append(errs, os.WriteFile(p.path(name), data, 0o600))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.WriteFile(p.path("ca.crt"), files["ca.crt"], 0o600)
}

func sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey crypto.Signer) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(5 * 365 * 24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return der, cert, err
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// clientCert issues a client certificate for user in groups, signed by
// the control plane's CA, and returns it and its key as PEM.
func (p pki) clientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	caCert, err := readPEM(p.path("ca.crt"), x509.ParseCertificate)
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA certificate: %w", err)
	}
	caKey, err := readPEM(p.path("ca.key"), x509.ParsePKCS8PrivateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA key: %w", err)
	}
	signer, ok := caKey.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("the CA key in %s cannot sign", p.path("ca.key"))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, _, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, key, caCert, signer)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

func readPEM[T any](path string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return zero, fmt.Errorf("%s holds no PEM block", path)
	}
	return parse(block.Bytes)
}
