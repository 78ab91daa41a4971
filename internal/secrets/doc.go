// Package secrets reads and writes files encrypted with SOPS for age
// recipients: the render decrypts them in memory with the identities of
// a Sync's key Secret (Keys), and `driftless secret` encrypts, decrypts
// and edits them in a working copy.
//
// Only age is supported. A file also encrypted for PGP or a cloud KMS
// decrypts when one of its age recipients is ours; those other keys are
// ignored. Shamir key groups (more than one key group) are refused.
package secrets
