package secrets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
)

// KeySuffix ends the name of every entry of a key Secret that holds age
// identities.
const KeySuffix = ".agekey"

// The names of a key Secret's entries, as Flux's kustomize-controller
// reads them, so that a Flux user's Secret works unchanged.
const (
	// PGPSuffix ends the name of every entry that holds armored OpenPGP
	// private keys (gpg --export-secret-keys --armor).
	PGPSuffix = ".asc"
	// AWSEntry holds AWS credentials for AWS KMS, as YAML with
	// aws_access_key_id, aws_secret_access_key and optionally
	// aws_session_token.
	AWSEntry = "sops.aws-kms"
	// GCPEntry holds a Google service account's JSON key for GCP KMS
	// (type service_account; every other type is refused).
	GCPEntry = "sops.gcp-kms"
	// AzureEntry holds a service principal's credentials for Key Vault,
	// as YAML or JSON with tenantId, clientId and clientSecret (or
	// clientCertificate), or appId, tenant and password as `az ad sp
	// create-for-rbac` prints them. Only clientId (the agent's managed
	// identity) is refused.
	AzureEntry = "sops.azure-kv"
	// VaultEntry holds a HashiCorp Vault (or OpenBao) token for Vault
	// Transit.
	VaultEntry = "sops.vault-token"
)

// Keys are the keys that decrypt a Sync's files: age identities, OpenPGP
// private keys and credentials for the cloud key services. The zero
// value holds none.
type Keys struct {
	identities []age.Identity
	recipients []string // the public recipients of identities, for messages
	pgp        openpgp.EntityList
	pgpFprs    []string // the fingerprints of pgp, for messages
	cloud      cloudCredentials
	digest     string
}

// ParseKeys reads the keys of a key Secret's entries (entries ending in
// .agekey hold age identities, entries ending in .asc armored OpenPGP
// private keys; sops.aws-kms, sops.gcp-kms, sops.azure-kv and
// sops.vault-token hold credentials for the cloud key services); source
// names the Secret in errors. An .agekey entry may hold several
// identities, one a line; empty lines and lines starting with "#"
// (age-keygen's comments) are skipped. It is an error for the Secret to
// hold none of these, or for one of them not to parse: the error names
// the entry, never its content.
func ParseKeys(source string, entries map[string][]byte) (*Keys, error) {
	k := &Keys{}
	h := sha256.New()
	found := false
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		var err error
		switch {
		case strings.HasSuffix(name, KeySuffix):
			err = k.addAge(name, entries[name])
		case strings.HasSuffix(name, PGPSuffix):
			err = k.addPGP(name, entries[name])
		case isCloudEntry(name):
			err = k.cloud.add(name, entries[name])
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		found = true
		fmt.Fprintf(h, "%d:%s%d:%s\n", len(name), name, len(entries[name]), entries[name])
	}
	if !found {
		return nil, fmt.Errorf("%s holds no decryption key: add an entry whose name ends in %s holding an age identity (driftless secret keygen --create-secret makes it) or in %s holding an armored PGP private key, or credentials for a cloud key service (%s, %s, %s, %s)",
			source, KeySuffix, PGPSuffix, AWSEntry, GCPEntry, AzureEntry, VaultEntry)
	}
	k.digest = hex.EncodeToString(h.Sum(nil))
	return k, nil
}

// errNoDetail stands for an error whose words could quote key material.
var errNoDetail = errors.New("details withheld")

// Recipients returns the public age recipients of the keys.
func (k *Keys) Recipients() []string { return slices.Clone(k.recipients) }

// PGPFingerprints returns the fingerprints of the OpenPGP keys, in
// upper-case hexadecimal as gpg prints them.
func (k *Keys) PGPFingerprints() []string { return slices.Clone(k.pgpFprs) }

// LimitAddresses makes k refuse the addresses of key services that check
// refuses: before any request, the Vault Transit address and Azure Key
// Vault URL of a file's sops metadata and the entries' Azure
// authorityHost and Google token_uri; and every request to a key service
// named there, a redirect's included. check is (source.Hosts).CheckURL
// for a tenant's Sync when --tenant-source-hosts restricts; what names
// the address in its error. Whatever check says, only http and https
// addresses are reached. A nil k is fine.
func (k *Keys) LimitAddresses(check func(what, address string) error) {
	if k != nil {
		k.cloud.check = check
	}
}

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
// The file's data key is decrypted with an age or PGP key of k where
// one fits, in process; else with a cloud key service k has credentials
// for, over the network (at most cloudTimeout per key). Errors never
// quote a value of the file nor key material.
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
		return nil, errors.New("failed its integrity check (MAC mismatch): a value was changed, added or removed after it was encrypted (sops's MAC covers the file's non-empty values, not its keys); edit encrypted files with driftless secret edit or sops, never by hand")
	}
	if err := uncovered(tree, dataKey); err != nil {
		return nil, err
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

// dataKey decrypts the file's data key with one of k's keys: the age and
// PGP keys first, which need no network, then the cloud key services.
// Its error says, for each kind of key the file is encrypted for, why
// none decrypted it.
func (k *Keys) dataKey(md sops.Metadata) ([]byte, error) {
	if len(md.KeyGroups) > 1 {
		return nil, fmt.Errorf("uses %d key groups (Shamir secret sharing), which driftless does not support; encrypt it for its keys in one key group", len(md.KeyGroups))
	}
	var group sops.KeyGroup
	if len(md.KeyGroups) == 1 {
		group = md.KeyGroups[0]
	}
	if key, ok := k.ageDataKey(group); ok {
		return key, nil
	}
	if key, ok, err := k.pgpDataKey(group); ok || err != nil {
		return key, err
	}
	key, cloudWhy := k.cloud.dataKey(group)
	if key != nil {
		return key, nil
	}
	var why []string
	if r := groupAgeRecipients(group); len(r) > 0 {
		why = append(why, fmt.Sprintf("is encrypted for age recipients %s, none of which the key Secret holds (it holds %s)", strings.Join(r, ", "), listOrNone(k.recipients)))
	}
	if f := groupPGPFingerprints(group); len(f) > 0 {
		why = append(why, fmt.Sprintf("is encrypted for PGP keys %s, none of which the key Secret holds (it holds %s)", strings.Join(f, ", "), listOrNone(k.pgpFprs)))
	}
	why = append(why, cloudWhy...)
	if len(why) == 0 {
		return nil, errors.New("is encrypted for no key driftless reads (age, PGP, AWS KMS, GCP KMS, Azure Key Vault, Vault Transit); encrypt it again (driftless secret encrypt --age)")
	}
	return nil, fmt.Errorf("%s; add a matching key or credentials to the key Secret, or encrypt the file for one of its keys", strings.Join(why, "; "))
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
