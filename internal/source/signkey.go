package source

import (
	"bytes"
	"fmt"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// SigningKeyEntry is the Secret key of the armored OpenPGP private key that
// commits are signed with.
const SigningKeyEntry = "git.asc"

// SigningKeyError says why a signing key Secret cannot be used. Its
// message names the Secret and what to do; it never holds key material.
type SigningKeyError struct {
	Err error
}

func (e *SigningKeyError) Error() string { return e.Err.Error() }
func (e *SigningKeyError) Unwrap() error { return e.Err }

func badSigningKey(format string, args ...any) error {
	return &SigningKeyError{Err: fmt.Errorf(format, args...)}
}

// ParseSigningKey reads the OpenPGP key of the Secret named secret (for
// messages) from its data: the entry git.asc, one armored private key
// without a passphrase that can sign at now. It fails with a
// *SigningKeyError otherwise.
func ParseSigningKey(secret string, data map[string][]byte, now time.Time) (*openpgp.Entity, error) {
	export := "export one with gpg --armor --export-secret-keys KEYID"
	raw, ok := data[SigningKeyEntry]
	if !ok {
		return nil, badSigningKey("signing key Secret %s has no %s entry: %s, and store it under %s", secret, SigningKeyEntry, export, SigningKeyEntry)
	}
	entities, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(raw))
	if err != nil {
		return nil, badSigningKey("signing key Secret %s: %s is not an armored OpenPGP key (%w): %s", secret, SigningKeyEntry, err, export)
	}
	if len(entities) != 1 {
		return nil, badSigningKey("signing key Secret %s: %s holds %d keys: store exactly one", secret, SigningKeyEntry, len(entities))
	}
	e := entities[0]
	if e.PrivateKey == nil {
		return nil, badSigningKey("signing key Secret %s: %s holds a public key only: %s", secret, SigningKeyEntry, export)
	}
	key, ok := e.SigningKey(now)
	if !ok {
		return nil, badSigningKey("signing key Secret %s: the key in %s (%s) cannot sign: it has expired, is revoked or has no signing capability; make a signing key (gpg --quick-gen-key NAME ed25519 sign)", secret, SigningKeyEntry, e.PrimaryKey.KeyIdString())
	}
	if key.PrivateKey == nil || key.PrivateKey.Encrypted {
		return nil, badSigningKey("signing key Secret %s: the key in %s (%s) is protected by a passphrase, which the agent cannot enter: "+
			"store a copy without one (gpg --passwd KEYID, empty passphrase, then gpg --armor --export-secret-keys KEYID)", secret, SigningKeyEntry, key.PublicKey.KeyIdString())
	}
	return e, nil
}
