// Package admission is the agent's optional validating admission webhook
// (--admission-warnings): it tells the person who edits an object a Sync
// manages, through the API server's admission warnings that kubectl
// prints, that the change will be reverted and where in git to make it,
// and refuses edits of objects annotated driftless.dev/protect=deny. It
// also refuses a Sync whose spec.healthChecks do not compile, with the
// message the agent would stall the Sync with.
//
// Its mutating half (Stamper) changes one thing: a write that sets or
// changes a Sync's driftless.dev/hold gets by set to the request's user,
// at to the time, and a stamp the agent checks before it names who held
// the Sync.
//
// It serves HTTPS with a certificate it generates, keeps in a Secret and
// rotates before it expires, and registers itself in a
// ValidatingWebhookConfiguration and a MutatingWebhookConfiguration with
// failurePolicy Ignore, so the cluster never depends on it. It never
// decides what the agent does: a refused or warned edit is only advice
// given early; drift detection and revert stay in package drift.
//
// Decide is the pure decision (who, what, which Sync); Handler turns
// AdmissionReview requests into it; Stamper stamps holds; Server serves
// and registers them.
package admission
