package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/crypto/ssh"
)

// VerifyMode says which git object must carry a trusted signature.
type VerifyMode string

// Verification modes.
const (
	// VerifyHEAD checks the commit that is checked out.
	VerifyHEAD VerifyMode = "HEAD"
	// VerifyTag checks the annotated tag of Ref.Tag, which must point at
	// the commit that is checked out.
	VerifyTag VerifyMode = "Tag"
)

// Verification asks Checkout to refuse a revision that is not signed by
// one of Keys.
type Verification struct {
	Mode VerifyMode
	Keys *TrustedKeys
}

// VerificationError refuses a revision, or says why the trusted keys
// cannot be used. Its message names the commit or tag, the signer found
// and what to do; it never holds key material.
type VerificationError struct {
	Err error
}

func (e *VerificationError) Error() string { return e.Err.Error() }
func (e *VerificationError) Unwrap() error { return e.Err }

func unverified(format string, args ...any) error {
	return &VerificationError{Err: fmt.Errorf(format, args...)}
}

// TrustedKeys are the keys of a verification Secret.
type TrustedKeys struct {
	secret string
	ssh    []allowedSigner
	pgp    openpgp.EntityList
}

// AllowedSignersKey is the Secret key of the SSH allowed signers; every
// key ending in PGPKeySuffix holds armored OpenPGP public keys.
const (
	AllowedSignersKey = "allowed_signers"
	PGPKeySuffix      = ".asc"
)

// ParseTrustedKeys reads the trusted keys of the Secret named secret
// (for messages) from its data. It fails, with a *VerificationError,
// when an entry cannot be read or there is no key at all.
func ParseTrustedKeys(secret string, data map[string][]byte) (*TrustedKeys, error) {
	k := &TrustedKeys{secret: secret}
	if raw, ok := data[AllowedSignersKey]; ok {
		signers, err := parseAllowedSigners(raw)
		if err != nil {
			return nil, unverified("trusted keys Secret %s: %s %w: fix the entry (OpenSSH allowed signers format)", secret, AllowedSignersKey, err)
		}
		k.ssh = signers
	}
	names := make([]string, 0, len(data))
	for name := range data {
		if strings.HasSuffix(name, PGPKeySuffix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		entities, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data[name]))
		if err != nil {
			return nil, unverified("trusted keys Secret %s: %s is not an armored OpenPGP public key (%w): export it with gpg --armor --export KEYID", secret, name, err)
		}
		for _, e := range entities {
			if e.PrivateKey != nil {
				return nil, unverified("trusted keys Secret %s: %s holds a private key: store only the public key (gpg --armor --export KEYID), and revoke the leaked one", secret, name)
			}
		}
		k.pgp = append(k.pgp, entities...)
	}
	if len(k.ssh) == 0 && len(k.pgp) == 0 {
		return nil, unverified("trusted keys Secret %s holds no key: add %s (OpenSSH allowed signers) or a *%s entry (armored OpenPGP public key)",
			secret, AllowedSignersKey, PGPKeySuffix)
	}
	return k, nil
}

// verifyRevision checks, in repo, the signature that v asks for on
// revision, checked out for ref. It returns nil or a *VerificationError.
func (v *Verification) verifyRevision(repo *git.Repository, ref Ref, revision string) error {
	if v.Mode == VerifyTag {
		return v.verifyTag(repo, ref.Tag, revision)
	}
	what := "commit " + Short(revision)
	c, err := repo.CommitObject(plumbing.NewHash(revision))
	if err != nil {
		return fmt.Errorf("read %s to verify its signature: %w", what, err)
	}
	payload, err := unsigned(c.EncodeWithoutSignature)
	if err != nil {
		return fmt.Errorf("encode %s to verify its signature: %w", what, err)
	}
	return v.Keys.check(what, "commit", c.PGPSignature, payload)
}

func (v *Verification) verifyTag(repo *git.Repository, tag, revision string) error {
	what := "tag " + tag
	if tag == "" {
		return unverified("verify mode Tag needs a tag to follow: set spec.source.git.tag, or use mode HEAD")
	}
	ref, err := repo.Reference(plumbing.NewTagReferenceName(tag), false)
	if err != nil {
		return fmt.Errorf("read %s to verify its signature: %w", what, err)
	}
	t, err := repo.TagObject(ref.Hash())
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return unverified("%s is a lightweight tag, which cannot be signed: verify mode Tag needs a signed annotated tag "+
			"(git tag -s %s), or use mode HEAD to verify the commit's own signature", what, tag)
	}
	if err != nil {
		return fmt.Errorf("read %s to verify its signature: %w", what, err)
	}
	if t.TargetType != plumbing.CommitObject || t.Target.String() != revision {
		return unverified("%s points at %s %s, not at commit %s being checked out: tag a commit directly",
			what, t.TargetType, Short(t.Target.String()), Short(revision))
	}
	payload, err := unsigned(t.EncodeWithoutSignature)
	if err != nil {
		return fmt.Errorf("encode %s to verify its signature: %w", what, err)
	}
	return v.Keys.check(fmt.Sprintf("%s (commit %s)", what, Short(revision)), "tag", t.PGPSignature, payload)
}

// unsigned returns the bytes a commit or tag signature signs: the
// object as encode writes it without its signature.
func unsigned(encode func(plumbing.EncodedObject) error) ([]byte, error) {
	obj := &plumbing.MemoryObject{}
	if err := encode(obj); err != nil {
		return nil, err
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// check verifies signature over message. what names the object ("commit
// 1a2b3c4"); noun is its kind, for advice.
func (k *TrustedKeys) check(what, noun, signature string, message []byte) error {
	sign := fmt.Sprintf("sign the %s with a trusted key", noun)
	trimmed := strings.TrimSpace(signature)
	switch {
	case trimmed == "":
		return unverified("%s is not signed: only %ss signed by a key in Secret %s are applied; %s", what, noun, k.secret, sign)
	case strings.Count(trimmed, "-----BEGIN ") > 1:
		return unverified("%s carries more than one signature, which driftless does not accept: %s, once", what, sign)
	case strings.HasPrefix(trimmed, sshsigBegin):
		return k.checkSSH(what, sign, trimmed, message)
	case strings.HasPrefix(trimmed, "-----BEGIN PGP SIGNATURE-----"):
		return k.checkPGP(what, sign, trimmed, message)
	}
	return unverified("%s carries a signature of a kind driftless cannot verify (only SSH and OpenPGP): %s", what, sign)
}

func (k *TrustedKeys) checkSSH(what, sign, armored string, message []byte) error {
	sig, err := parseSSHSignature(armored)
	if err != nil {
		return unverified("%s has an unreadable signature (%w): %s", what, err, sign)
	}
	signer := fmt.Sprintf("SSH key %s (%s)", ssh.FingerprintSHA256(sig.key), sig.key.Type())
	if err := sig.verify(message); err != nil {
		return unverified("%s has a signature by %s that does not match its content (changed after signing, or corrupt: %w): %s", what, signer, err, strings.Replace(sign, " with ", " again with ", 1))
	}
	if sig.namespace != gitNamespace {
		return unverified("%s is signed by %s in namespace %q, not %q: %s using git", what, signer, sig.namespace, gitNamespace, sign)
	}
	var lines []int
	for _, a := range k.ssh {
		if !bytes.Equal(a.key.Marshal(), sig.key.Marshal()) {
			continue
		}
		if a.allows(gitNamespace) {
			return nil
		}
		lines = append(lines, a.line)
	}
	if len(lines) > 0 {
		return unverified("%s is signed by %s, which %s/%s allows only for other namespaces (line %s): add git to its namespaces= option, or %s",
			what, signer, k.secret, AllowedSignersKey, joinInts(lines), sign)
	}
	return unverified("%s is signed by %s, which is not trusted: add the key to %s/%s or %s", what, signer, k.secret, AllowedSignersKey, sign)
}

func (k *TrustedKeys) checkPGP(what, sign, armored string, message []byte) error {
	signer := "an OpenPGP key"
	if id, err := pgpIssuer(armored); err != nil {
		return unverified("%s has an unreadable OpenPGP signature (%w): %s", what, err, sign)
	} else if id != "" {
		signer = "OpenPGP key " + id
	}
	_, err := openpgp.CheckArmoredDetachedSignature(k.pgp, bytes.NewReader(message), strings.NewReader(armored), nil)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return unverified("%s is signed by %s, which is not trusted: add its armored public key to Secret %s as a *%s entry, or %s",
			what, signer, k.secret, PGPKeySuffix, sign)
	}
	return unverified("%s has a signature by %s that does not verify (%w): %s", what, signer, err, strings.Replace(sign, " with ", " again with ", 1))
}

// pgpIssuer returns the key ID (16 hex digits) the armored signature
// names as its issuer, or "".
func pgpIssuer(armored string) (string, error) {
	block, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return "", err
	}
	p, err := packet.Read(block.Body)
	if err != nil {
		return "", err
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return "", errors.New("not a signature packet")
	}
	if sig.IssuerKeyId == nil {
		return "", nil
	}
	return fmt.Sprintf("%016X", *sig.IssuerKeyId), nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// verifyCheckout checks the signature v asks for on revision in the
// checkout in dir.
func (v *Verification) verifyCheckout(dir string, ref Ref, revision string) error {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return err
	}
	return v.verifyRevision(repo, ref, revision)
}
