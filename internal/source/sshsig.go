package source

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"path"
	"strings"

	"golang.org/x/crypto/ssh"
)

// This file verifies SSH signatures as git makes them with
// gpg.format=ssh (OpenSSH PROTOCOL.sshsig) against an allowed_signers
// file (ssh-keygen(1), ALLOWED SIGNERS).

const (
	sshsigMagic   = "SSHSIG"
	sshsigVersion = 1
	sshsigBegin   = "-----BEGIN SSH SIGNATURE-----"
	sshsigEnd     = "-----END SSH SIGNATURE-----"
	// gitNamespace is the namespace git signs commits and tags in.
	gitNamespace = "git"
)

// sshSignature is a parsed SSHSIG blob.
type sshSignature struct {
	key       ssh.PublicKey
	namespace string
	reserved  string
	hashAlg   string
	sig       *ssh.Signature
}

// sshsigBlob is the wire form after the magic preamble.
type sshsigBlob struct {
	Version       uint32
	PublicKey     []byte
	Namespace     string
	Reserved      string
	HashAlgorithm string
	Signature     []byte
}

// parseSSHSignature reads an armored SSH signature.
func parseSSHSignature(armored string) (*sshSignature, error) {
	body := strings.TrimSpace(armored)
	if len(body) < len(sshsigBegin)+len(sshsigEnd) || !strings.HasPrefix(body, sshsigBegin) || !strings.HasSuffix(body, sshsigEnd) {
		return nil, errors.New("not an armored SSH signature")
	}
	body = strings.Join(strings.Fields(body[len(sshsigBegin):len(body)-len(sshsigEnd)]), "")
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("SSH signature is not valid base64: %w", err)
	}
	if !bytes.HasPrefix(raw, []byte(sshsigMagic)) {
		return nil, errors.New("SSH signature lacks the SSHSIG preamble")
	}
	var blob sshsigBlob
	if err := ssh.Unmarshal(raw[len(sshsigMagic):], &blob); err != nil {
		return nil, fmt.Errorf("SSH signature is malformed: %w", err)
	}
	if blob.Version != sshsigVersion {
		return nil, fmt.Errorf("SSH signature has version %d, want %d", blob.Version, sshsigVersion)
	}
	key, err := ssh.ParsePublicKey(blob.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("SSH signature holds an unreadable public key: %w", err)
	}
	sig := new(ssh.Signature)
	if err := ssh.Unmarshal(blob.Signature, sig); err != nil {
		return nil, fmt.Errorf("SSH signature is malformed: %w", err)
	}
	return &sshSignature{key: key, namespace: blob.Namespace, reserved: blob.Reserved, hashAlg: blob.HashAlgorithm, sig: sig}, nil
}

// verify checks that s signs message in its namespace with its key. It
// does not decide whether the key or the namespace are trusted.
func (s *sshSignature) verify(message []byte) error {
	var h hash.Hash
	switch s.hashAlg {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return fmt.Errorf("unsupported hash algorithm %q", s.hashAlg)
	}
	if s.sig.Format == ssh.KeyAlgoRSA {
		// SHA-1 RSA signatures are refused, as ssh-keygen refuses them.
		return errors.New("RSA signature with SHA-1 (ssh-rsa) is not accepted")
	}
	h.Write(message)
	signed := append([]byte(sshsigMagic), ssh.Marshal(struct {
		Namespace, Reserved, HashAlgorithm string
		Hash                               []byte
	}{s.namespace, s.reserved, s.hashAlg, h.Sum(nil)})...)
	return s.key.Verify(signed, s.sig)
}

// allowedSigner is one line of an allowed_signers file.
type allowedSigner struct {
	line int
	key  ssh.PublicKey
	// namespaces are the patterns of the namespaces= option; nil allows
	// every namespace.
	namespaces []string
}

// allows reports whether a trusts signatures in namespace.
func (a allowedSigner) allows(namespace string) bool {
	return a.namespaces == nil || matchPatternList(namespace, a.namespaces)
}

// parseAllowedSigners reads an allowed_signers file: per line, the
// principals, optional options, the key type and the base64 key; blank
// lines and # comments are skipped. Errors name the line, never its
// content. Options that would restrict a key in a way driftless cannot
// honour (cert-authority, valid-after, valid-before) are refused rather
// than ignored.
func parseAllowedSigners(data []byte) ([]allowedSigner, error) {
	var out []allowedSigner
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := skipPrincipals(line)
		if !ok {
			return nil, fmt.Errorf("line %d: expected principals, then the key type and key", n)
		}
		key, _, options, _, err := ssh.ParseAuthorizedKey([]byte(rest))
		if err != nil {
			return nil, fmt.Errorf("line %d: no valid public key after the principals (want e.g. \"user@example.com ssh-ed25519 AAAA…\")", n)
		}
		signer := allowedSigner{line: n, key: key}
		for _, opt := range options {
			name, value, _ := strings.Cut(opt, "=")
			switch strings.ToLower(name) {
			case "namespaces":
				signer.namespaces = strings.Split(strings.Trim(value, `"`), ",")
			case "cert-authority", "valid-after", "valid-before":
				return nil, fmt.Errorf("line %d: option %s is not supported: list the signing key itself, without it", n, name)
			default:
				return nil, fmt.Errorf("line %d: unknown option %q", n, name)
			}
		}
		out = append(out, signer)
	}
	return out, nil
}

// skipPrincipals returns line after its first field, the principals,
// which may be quoted.
func skipPrincipals(line string) (string, bool) {
	if strings.HasPrefix(line, `"`) {
		end := strings.Index(line[1:], `"`)
		if end < 0 {
			return "", false
		}
		return strings.TrimSpace(line[end+2:]), true
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return "", false
	}
	return strings.TrimSpace(line[i:]), true
}

// matchPatternList reports whether s matches a list of OpenSSH patterns
// (* and ? wildcards; a leading ! negates and wins).
func matchPatternList(s string, patterns []string) bool {
	matched := false
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		negated := strings.HasPrefix(p, "!")
		if ok, _ := path.Match(strings.TrimPrefix(p, "!"), s); ok {
			if negated {
				return false
			}
			matched = true
		}
	}
	return matched
}
