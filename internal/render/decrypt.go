package render

import (
	"bytes"
	"errors"
)

// Decryptor decrypts files of the repository encrypted with SOPS.
type Decryptor interface {
	// Decrypt returns the plaintext of data, the content of the file name
	// (a slash-separated path in the checkout) encrypted with SOPS. Its
	// error completes the sentence "file <name> …" and never quotes a
	// value of the file nor key material.
	Decrypt(name string, data []byte) ([]byte, error)
}

// sopsMarker starts every value SOPS encrypts, its MAC included, in every
// format: a file without it is not encrypted.
var sopsMarker = []byte("ENC[AES256_GCM,")

// ErrEncrypted is wrapped by the error about a file that could not be
// decrypted: no Options.Decrypt, a key that does not fit, a changed or
// half-encrypted file.
var ErrEncrypted = errors.New("encrypted file")

// decryptError is a file that could not be decrypted.
type decryptError struct {
	name string
	err  error // completes "file <name> …"
}

func (e *decryptError) Error() string        { return "file " + e.name + " " + e.err.Error() }
func (e *decryptError) Is(target error) bool { return target == ErrEncrypted }

var errNoDecryptor = errors.New("is encrypted with SOPS, and the Sync sets no spec.decryption; set spec.decryption.secretRef to a Secret holding its key (an age identity, an armored PGP private key, or cloud key service credentials: docs/secrets.md)")

// decrypt returns data, the content of the file name, decrypted when it is
// encrypted with SOPS, and records that it was. The plaintext is only
// ever held in memory.
func (r *renderer) decrypt(name string, data []byte) ([]byte, error) {
	if !bytes.Contains(data, sopsMarker) {
		return data, nil
	}
	if r.opts.Decrypt == nil {
		return nil, &decryptError{name: name, err: errNoDecryptor}
	}
	plain, err := r.opts.Decrypt.Decrypt(name, data)
	if err != nil {
		return nil, &decryptError{name: name, err: err}
	}
	if r.decrypted == nil {
		r.decrypted = map[string]bool{}
	}
	r.decrypted[name] = true
	return plain, nil
}

// markDecrypted marks the objects from index from on as holding values
// decrypted from a file.
func (r *renderer) markDecrypted(from int) {
	for i := from; i < len(r.pending); i++ {
		r.pending[i].decrypted = true
	}
}
