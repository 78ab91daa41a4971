// Package update is the write-back of image automation: it clones a
// Sync's repository with the Sync's credentials, rewrites the image
// markers under its paths (internal/image/setters), and in Commit mode
// commits and pushes the change, re-applying it on the new head when a
// push loses a race.
package update
