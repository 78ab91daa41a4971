// Package source fetches the files a Sync renders: from git repositories
// with go-git, from OCI artifacts (internal/source/oci) and, for its Helm
// charts, from chart repositories and registries (internal/source/charts).
//
// A Mirror fetches each repository once per revision for all its readers
// (mirrors keyed by URL and credentials, never written to disk with a
// credential) and keeps one read-only tree per revision that they all
// render from; it resolves a branch, tag or commit (Resolve, ResolveSince,
// shared between the Syncs of one repository), tells whether paths changed
// between revisions (PathsDigest), how far a revision is behind its
// branch's tip (Behind, for holds), what a commit says (Commit), and serves
// OCI sources the same way: Request.Kind (v1alpha1.SourceGit or SourceOCI)
// is the one place that tells them apart. Checkout and Resolve without a
// Mirror serve the CLI. Every checkout that is read is written by
// WriteTree, read-only, after checking the whole tree: it refuses entries
// named "..", ".git" or holding "/", symbolic links that leave the tree,
// and trees over TreeLimits. CacheLimit keeps the mirrors, artifacts and
// charts on disk under a size.
//
// It authenticates over SSH with a deploy key and a verified host key, over
// HTTPS with a token or basic auth, and reads file:// repositories directly
// (Credentials). Errors never contain credentials (Redact, RedactError).
// Hosts is the allow-list of hosts a tenant may fetch from; Protocol and
// CheckRef check an address and a ref without the network; RepositoryKey
// names a repository however its address is spelled (to match push
// notices); ResolveName resolves the ref of a remote Kustomize base.
//
// With Request.Verify, a checkout is refused unless its commit (or the
// annotated tag it follows) is signed by a trusted key: SSH signatures
// against an allowed_signers file (sshsig.go) or OpenPGP signatures against
// armored public keys (verify.go). It does not verify the history behind
// the revision.
//
// Its write side is Base: a shallow repository at a branch's tip for a
// writer to commit on (image updates); ParseSigningKey reads the key such
// commits are signed with. It does not commit or push itself
// (internal/image/update does), nor render anything (internal/render).
package source
