// Package source fetches a revision of a git repository with go-git: it
// resolves a branch, tag or commit to a revision, and checks it out into
// a directory the caller keeps, reusing it while the revision is the same.
//
// It authenticates over SSH with a deploy key and a verified host key,
// over HTTPS with a token or basic auth, and reads file:// repositories
// directly. Errors never contain credentials.
package source
