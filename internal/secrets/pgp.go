package secrets

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/pgp"
)

// addPGP adds the OpenPGP private keys of the entry name, armored as
// gpg --export-secret-keys --armor writes them. Keys are held in memory
// only: no gpg, no agent, no keyring on disk. A key protected by a
// passphrase is refused, since nobody is there to type it, as is an
// entry holding only public keys.
func (k *Keys) addPGP(name string, data []byte) error {
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("entry %s holds no armored PGP key (gpg --export-secret-keys --armor FINGERPRINT writes one): %w", name, errNoDetail)
	}
	private := 0
	for _, e := range ring {
		fpr := strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
		if protected(e) {
			return fmt.Errorf("entry %s holds PGP key %s protected by a passphrase, which the agent cannot type: remove the passphrase from a copy of the key (gpg --passwd, empty passphrase) and export that copy", name, fpr)
		}
		if !hasPrivate(e) {
			continue
		}
		private++
		k.pgp = append(k.pgp, e)
		k.pgpFprs = append(k.pgpFprs, fpr)
	}
	if private == 0 {
		return fmt.Errorf("entry %s holds only public PGP keys: export the private key (gpg --export-secret-keys --armor FINGERPRINT)", name)
	}
	return nil
}

// protected reports whether a private key of e is encrypted with a
// passphrase. A gnu-dummy primary key (gpg --export-secret-subkeys) is
// not: it holds no secret at all.
func protected(e *openpgp.Entity) bool {
	if e.PrivateKey != nil && e.PrivateKey.Encrypted && !e.PrivateKey.Dummy() {
		return true
	}
	for _, s := range e.Subkeys {
		if s.PrivateKey != nil && s.PrivateKey.Encrypted && !s.PrivateKey.Dummy() {
			return true
		}
	}
	return false
}

func hasPrivate(e *openpgp.Entity) bool {
	if e.PrivateKey != nil && !e.PrivateKey.Dummy() {
		return true
	}
	for _, s := range e.Subkeys {
		if s.PrivateKey != nil && !s.PrivateKey.Dummy() {
			return true
		}
	}
	return false
}

// pgpDataKey decrypts the data key with a PGP key of k, if the group
// holds a PGP master key encrypted for one; ok is false when none is.
// A message for one of k's keys that is not a data key (not encrypted,
// or longer than maxDataKey: a compressed message can expand to
// gigabytes) is an error naming the key, after reading at most
// maxDataKey+1 bytes of it.
func (k *Keys) pgpDataKey(group sops.KeyGroup) (key []byte, ok bool, err error) {
	if len(k.pgp) == 0 {
		return nil, false, nil
	}
	for _, mk := range group {
		pk, isPGP := mk.(*pgp.MasterKey)
		if !isPGP {
			continue
		}
		block, err := armor.Decode(strings.NewReader(pk.EncryptedKey))
		if err != nil {
			continue
		}
		md, err := openpgp.ReadMessage(block.Body, k.pgp, nil, nil)
		if err != nil {
			continue
		}
		fpr := strings.ToUpper(pk.Fingerprint)
		if !md.IsEncrypted || md.DecryptedWith.Entity == nil {
			return nil, false, fmt.Errorf("is encrypted for PGP key %s with a data key that is not encrypted (anyone could have written it): %w", fpr, errNotSops)
		}
		key, err := readDataKey(md.UnverifiedBody)
		if errors.Is(err, errDataKeyTooLong) {
			return nil, false, fmt.Errorf("is encrypted for PGP key %s with a data key %w: %w", fpr, err, errNotSops)
		}
		if err == nil && len(key) == 32 {
			return key, true, nil
		}
	}
	return nil, false, nil
}

// groupPGPFingerprints returns the fingerprints of the group's PGP keys.
func groupPGPFingerprints(group sops.KeyGroup) []string {
	var f []string
	for _, mk := range group {
		if pk, ok := mk.(*pgp.MasterKey); ok {
			f = append(f, strings.ToUpper(pk.Fingerprint))
		}
	}
	return f
}
