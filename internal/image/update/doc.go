// Package update is the write-back of image automation: it fetches the
// tip of a Sync's branch into the agent's git mirror with the Sync's
// credentials and checks out the Sync's paths from it
// (source.Mirror.Base), rewrites the image markers under them
// (internal/image/setters), and in Commit mode commits (optionally signed)
// and pushes the change, re-applying it on the new tip when a push loses a
// race. In PullRequest mode (Request.FromBase) it commits on top of the
// base and force-pushes the robot's branch, and Propose keeps one pull
// (merge) request of that branch open on GitHub, GitLab or Gitea through
// Forge, which sends the token only to the API's address.
//
// It does not decide which host a token may go to (the controller checks
// the address against the Sync's git URL) and does not read Secrets.
package update
