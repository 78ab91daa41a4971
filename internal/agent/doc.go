// Package agent assembles the driftless agent: Options (every
// `driftless agent` flag's value, with DefaultOptions the one place the
// defaults live), New and Run. It builds the controller manager, the Sync,
// drift and image controllers, notifications, the webhook receiver and the
// admission webhook, installs the CRDs, and sets the Go memory limit from
// the container's. The CLI turns flags into Options; tests start an agent
// through agenttest, the bench through New and Run. It holds no engine
// logic: that lives in controller, engine and below.
package agent
