package secrets

import (
	"bytes"
	"path"
	"strings"

	"github.com/getsops/sops/v3"
)

// Format is how SOPS lays out an encrypted file, chosen by the file's
// extension as the sops CLI chooses it.
type Format string

const (
	YAML   Format = "yaml"
	JSON   Format = "json"
	Dotenv Format = "dotenv"
	INI    Format = "ini"
	// Binary is any other file: SOPS stores it whole, as one encrypted
	// value of a JSON document.
	Binary Format = "binary"
)

// FormatOf returns the format of the file name.
func FormatOf(name string) Format {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return YAML
	case ".json":
		return JSON
	case ".env":
		return Dotenv
	case ".ini":
		return INI
	}
	return Binary
}

// store reads and writes files of the format as the sops CLI does, with
// its defaults (YAML indented by 4, JSON by a tab).
func (f Format) store() sops.Store {
	switch f {
	case YAML:
		return yamlStore()
	case JSON:
		return jsonStore()
	case Dotenv:
		return dotenvStore()
	case INI:
		return iniStore()
	}
	return binaryStore()
}

// encryptedMarker starts every value SOPS encrypts, its MAC included.
var encryptedMarker = []byte("ENC[AES256_GCM,")

// Encrypted reports whether data holds a value encrypted by SOPS: every
// file SOPS wrote does, in any format, since its MAC is one. A file that
// says so without SOPS metadata is half-encrypted, and Decrypt refuses it.
func Encrypted(data []byte) bool {
	return bytes.Contains(data, encryptedMarker)
}
