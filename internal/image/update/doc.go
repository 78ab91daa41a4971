// Package update is the write-back of image automation: it fetches the
// tip of a Sync's branch into the agent's git mirror with the Sync's
// credentials and checks out the Sync's paths from it
// (source.Mirror.Base), rewrites the image markers under them
// (internal/image/setters), and in Commit mode commits (optionally signed)
// and pushes the change, re-applying it on the new tip when a push loses a
// race.
package update
