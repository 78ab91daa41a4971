// Package source fetches a revision of a git repository with go-git: it
// resolves a branch, tag or commit to a revision, and checks it out into
// a directory the caller keeps, reusing it while the revision is the same.
//
// It authenticates over SSH with a deploy key and a verified host key,
// over HTTPS with a token or basic auth, and reads file:// repositories
// directly. Errors never contain credentials.
//
// With Request.Verify, a checkout is refused unless its commit (or the
// annotated tag it follows) is signed by a trusted key: SSH signatures
// against an allowed_signers file (verified here, sshsig.go) or OpenPGP
// signatures against armored public keys (verify.go). It does not verify
// the history behind the revision, nor render anything.
package source
