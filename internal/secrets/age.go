package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/getsops/sops/v3"
	sopsage "github.com/getsops/sops/v3/age"
)

// addAge adds the age identities of the entry name.
func (k *Keys) addAge(name string, data []byte) error {
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("entry %s holds no valid age identity (age-keygen writes one, starting with AGE-SECRET-KEY-1): %w", name, errNoDetail)
	}
	for _, id := range ids {
		x, ok := id.(*age.X25519Identity)
		if !ok {
			continue
		}
		k.identities = append(k.identities, x)
		k.recipients = append(k.recipients, x.Recipient().String())
	}
	return nil
}

// ageDataKey decrypts the data key with an age identity of k, if one of
// the group's age recipients is k's.
func (k *Keys) ageDataKey(group sops.KeyGroup) ([]byte, bool) {
	if len(k.identities) == 0 {
		return nil, false
	}
	for _, mk := range group {
		ak, ok := mk.(*sopsage.MasterKey)
		if !ok {
			continue
		}
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(ak.EncryptedKey)), k.identities...)
		if err != nil {
			continue
		}
		key, err := readDataKey(r)
		if err == nil && len(key) == 32 {
			return key, true
		}
	}
	return nil, false
}

// groupAgeRecipients returns the group's age recipients.
func groupAgeRecipients(group sops.KeyGroup) []string {
	var r []string
	for _, mk := range group {
		if ak, ok := mk.(*sopsage.MasterKey); ok {
			r = append(r, ak.Recipient)
		}
	}
	return r
}

// maxDataKey bounds what is read of a decrypted data key, which is 32
// bytes: a PGP message may be compressed, and expand to gigabytes.
const maxDataKey = 64

// errDataKeyTooLong completes "a data key …".
var errDataKeyTooLong = fmt.Errorf("longer than %d bytes (a SOPS data key is 32)", maxDataKey)

// errNotSops ends the error about a data key sops cannot have written.
var errNotSops = errors.New("the file was not written by sops; encrypt it again (driftless secret encrypt)")

// readDataKey reads a decrypted data key from r, at most maxDataKey bytes
// of it: a longer one is errDataKeyTooLong.
func readDataKey(r io.Reader) ([]byte, error) {
	key, err := io.ReadAll(io.LimitReader(r, maxDataKey+1))
	if err == nil && len(key) > maxDataKey {
		return nil, errDataKeyTooLong
	}
	return key, err
}
