// Package image holds the reconcilers of image automation: the
// ImagePolicy controller, which scans a registry and records the tag a
// policy selects, and the image update controller, which rewrites the
// markers in a Sync's repository to those tags and commits (or reports)
// the change, or proposes it as one pull request (PullRequest mode). The decisions live in internal/image/...; these stay thin.
package image
