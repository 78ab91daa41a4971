// Package receiver is the agent's webhook receiver: an HTTP server, run as
// a controller-runtime manager Runnable, that turns a git provider's push
// notice into a wake-up of the Syncs following the pushed repository and
// ref, so that a push converges without waiting for spec.interval.
//
// One endpoint per provider — /hooks/github, /hooks/gitlab, /hooks/gitea
// (Forgejo too), /hooks/bitbucket (Bitbucket Server / Data Center) and
// /hooks/generic — checks the request the way that provider signs it, with
// secrets read from one Secret in the agent's namespace (secret.go),
// compared in constant time; it wakes any Sync. /hooks/<provider>/<namespace>
// checks the request with the Secret TenantSecretName of that namespace
// and wakes only that namespace's Syncs. Requests are rate-limited per remote address
// and overall, bodies are limited in size, and a delivery seen before is
// ignored (limits.go). Payloads are parsed into a Push (payload.go) and
// matched against Syncs by repository and ref (match.go).
//
// It is not a sync path: it never fetches, renders or applies anything and
// never writes to the cluster except a throttled Warning event when it
// refuses a request. It only enqueues Sync reconciles on a channel that the
// Sync controller reads (controller.Options.Wake); the reconciler then
// resolves the ref as on any interval, so a forged or stale notice can at
// worst cause an early ls-remote. It does not send notifications or commit
// statuses.
package receiver
