package secrets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
)

// KeySuffix ends the name of every entry of a key Secret that holds age
// identities.
const KeySuffix = ".agekey"

// Keys are the age identities that decrypt a Sync's files. The zero
// value holds none.
type Keys struct {
	identities []age.Identity
	recipients []string // the public recipients of identities, for messages
	digest     string
}

// ParseKeys reads the age identities of every entry of a key Secret whose
// name ends in .agekey; source names the Secret in errors. An entry may
// hold several identities, one a line; empty lines and lines starting
// with "#" (age-keygen's comments) are skipped. It is an error for no
// entry to hold an identity, or for an entry not to parse: the error
// names the entry, never its content.
func ParseKeys(source string, entries map[string][]byte) (*Keys, error) {
	k := &Keys{}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		if !strings.HasSuffix(name, KeySuffix) {
			continue
		}
		ids, err := age.ParseIdentities(bytes.NewReader(entries[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: entry %s holds no valid age identity (age-keygen writes one, starting with AGE-SECRET-KEY-1): %w", source, name, errNoDetail)
		}
		for _, id := range ids {
			x, ok := id.(*age.X25519Identity)
			if !ok {
				continue
			}
			k.identities = append(k.identities, x)
			k.recipients = append(k.recipients, x.Recipient().String())
		}
		fmt.Fprintf(h, "%d:%s%d:%s\n", len(name), name, len(entries[name]), entries[name])
	}
	if len(k.identities) == 0 {
		return nil, fmt.Errorf("%s has no age identity: add an entry whose name ends in %s holding one (driftless secret keygen --create-secret makes it)", source, KeySuffix)
	}
	k.digest = hex.EncodeToString(h.Sum(nil))
	return k, nil
}

// errNoDetail stands for an error whose words could quote key material.
var errNoDetail = errors.New("details withheld")

// Recipients returns the public age recipients of the keys.
func (k *Keys) Recipients() []string { return slices.Clone(k.recipients) }

// Digest changes whenever the keys do, for caching a render.
func (k *Keys) Digest() string {
	if k == nil {
		return ""
	}
	return k.digest
}

// Decrypt returns the plaintext of data, the content of the file name
// encrypted with SOPS, laid out as SOPS lays out files of its format
// (FormatOf(name)). It checks the file's MAC, and refuses a file that is
// half-encrypted: values encrypted without SOPS metadata, a value the
// metadata says is encrypted that is not, or a value left encrypted
// after decryption (encrypted outside the file's encrypted_regex or
// suffix rules). Values outside those rules that are plain are fine.
// Errors never quote a value of the file nor key material.
func (k *Keys) Decrypt(name string, data []byte) ([]byte, error) {
	format := FormatOf(name)
	store := format.store()
	tree, err := store.LoadEncryptedFile(data)
	switch {
	case errors.Is(err, sops.MetadataNotFound):
		return nil, fmt.Errorf("is half-encrypted: it holds ENC[…] values but no sops metadata; restore the file as sops wrote it, or encrypt it again (driftless secret encrypt)")
	case err != nil:
		return nil, fmt.Errorf("is not a valid SOPS %s file; restore it as sops wrote it", format)
	}
	dataKey, err := k.dataKey(tree.Metadata)
	if err != nil {
		return nil, err
	}
	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(dataKey, cipher)
	if err != nil {
		// sops's error quotes the value it could not decrypt, which
		// may be a plain secret: never show it.
		return nil, errors.New("is half-encrypted or corrupt: a value its sops metadata says is encrypted is not a valid ENC[…] value; encrypt the file again (driftless secret encrypt)")
	}
	stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil || stored != mac {
		return nil, errors.New("failed its integrity check (MAC mismatch): it was changed after it was encrypted; edit encrypted files with driftless secret edit or sops, never by hand")
	}
	plain, err := store.EmitPlainFile(tree.Branches)
	if err != nil {
		return nil, fmt.Errorf("cannot be written out after decryption as %s", format)
	}
	if Encrypted(plain) {
		return nil, errors.New("is half-encrypted: it holds ENC[…] values outside what its sops metadata says is encrypted (encrypted_regex, suffixes); encrypt the file again (driftless secret encrypt)")
	}
	return plain, nil
}

// dataKey decrypts the file's data key with one of k's identities.
func (k *Keys) dataKey(md sops.Metadata) ([]byte, error) {
	if len(md.KeyGroups) > 1 {
		return nil, fmt.Errorf("uses %d key groups (Shamir secret sharing), which driftless does not support; encrypt it for age recipients in one key group", len(md.KeyGroups))
	}
	var recipients []string
	for _, group := range md.KeyGroups {
		for _, mk := range group {
			ak, ok := mk.(*sopsage.MasterKey)
			if !ok {
				continue
			}
			recipients = append(recipients, ak.Recipient)
			r, err := age.Decrypt(armor.NewReader(strings.NewReader(ak.EncryptedKey)), k.identities...)
			if err != nil {
				continue
			}
			key, err := io.ReadAll(r)
			if err == nil && len(key) == 32 {
				return key, nil
			}
		}
	}
	if len(recipients) == 0 {
		return nil, errors.New("is encrypted for no age recipient (PGP and cloud KMS keys are not supported); encrypt it for an age recipient (driftless secret encrypt --age)")
	}
	return nil, fmt.Errorf("is encrypted for age recipients %s, none of which the key Secret holds (it holds %s); add the matching identity to the key Secret, or encrypt the file for one of its recipients",
		strings.Join(recipients, ", "), strings.Join(k.recipients, ", "))
}
