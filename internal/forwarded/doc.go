// Package forwarded answers one question for every server of the agent
// that sits behind a proxy (the webhook receiver, the dashboard): which
// address sent this request? It believes X-Forwarded-For only from the
// proxies it is told to trust. It does not rate-limit or log; its callers
// do, keyed by its answer.
package forwarded
