// Package policy scans an image repository and decides which of its tags
// an ImagePolicy selects. The decision (Select) is a pure function of the
// tags and the policy; the scan (Scanner) lists tags and resolves digests
// with go-containerregistry, with credentials from a Secret, retries on
// 429 and 5xx answers and a request rate limit per registry.
package policy
