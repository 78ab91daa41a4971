// Package notify sends notifications about Syncs to chat and HTTP
// endpoints: Slack incoming webhooks, Microsoft Teams workflow webhooks
// and a generic JSON endpoint signed with HMAC-SHA256.
//
// It sits behind the event-recorder seam: Wrap returns a recorder that
// passes every event to the real one and hands events about Syncs to a
// Dispatcher, a manager Runnable. The dispatcher deduplicates (a state
// that does not change is sent once, with a reminder), summarises a
// flapping Sync, folds a burst of drift reverts into one message with a
// count, and delivers with retries from bounded queues, so a slow or dead
// endpoint never blocks a reconciler: what does not fit is dropped and
// counted.
//
// It is not the webhook receiver (internal/receiver) and does not read
// git: a message carries what the event and the Sync's status say. It
// adds no values of its own to a message; event notes are masked by the
// controllers that write them.
package notify
