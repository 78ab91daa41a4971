// Package secrets reads and writes files encrypted with SOPS: the render
// decrypts them in memory with the keys of a Sync's key Secret (Keys),
// and `driftless secret` encrypts, decrypts and edits them for age
// recipients in a working copy.
//
// A file's data key is decrypted with an age identity or an armored
// OpenPGP private key of the Secret, in process (no gpg, no agent, no
// keyring on disk), or with AWS KMS, GCP KMS, Azure Key Vault or Vault
// Transit through sops's own master keys, with credentials from the
// Secret only (entries named as Flux names them). A Sync's key material
// never makes the agent use an identity, a file or an address of its
// own: only service-account Google keys, no Azure managed identity, no
// AWS profile, and only the key-service hosts the caller allows
// (Keys.LimitAddresses). A decrypted data key is read 65 bytes at most.
// Shamir key groups (more than one key group) are refused.
//
// Files are read and written as the sops CLI reads and writes them, by
// stores of this package (store_*.go), not SOPS's: those link SOPS's
// config and publish packages, cloud storage clients that cost every
// agent process about 10 MiB. It is not a SOPS CLI: it writes for age
// recipients only, one key group.
package secrets
