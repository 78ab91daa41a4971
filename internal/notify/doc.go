// Package notify sends notifications about Syncs to chat and HTTP
// endpoints — Slack incoming webhooks, Microsoft Teams workflow webhooks
// and a generic JSON endpoint signed with HMAC-SHA256 — and deploy
// statuses to commits on GitHub, GitLab and Gitea/Forgejo.
//
// It sits behind the event-recorder seam: Wrap returns a recorder that
// passes every event to the real one and hands events about Syncs to a
// Dispatcher, a manager Runnable. The dispatcher deduplicates (a state
// that does not change is sent once, with a reminder), summarises a
// flapping Sync, folds a burst of drift reverts into one message with a
// count, and delivers with retries from bounded queues, so a slow or dead
// endpoint never blocks a reconciler: what does not fit is dropped and
// counted. Commit statuses come through Syncing and Synced, which the
// Sync reconciler calls when a sync of a new revision starts and ends
// (one status per Sync, revision and state). With a StateStore the
// dedup state survives restarts (ConfigMapState).
//
// It is not the webhook receiver (internal/receiver) and does not read
// git: a message carries what the event and the Sync's status say (the
// commit's subject and author come from status.history). It adds no
// values of its own to a message; event notes are masked by the
// controllers that write them, and API tokens go in headers only.
package notify
