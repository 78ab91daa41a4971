// Package source fetches a revision of a git repository with go-git: it
// resolves a branch, tag or commit to a revision, and keeps one cached
// checkout per Sync, refreshed only when the revision changes.
//
// It authenticates over SSH with a deploy key and a verified host key,
// over HTTPS with a token or basic auth, and reads file:// repositories
// directly. Errors never contain credentials.
package source
