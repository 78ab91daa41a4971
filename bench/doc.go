// Command bench measures driftless against its performance targets
// (docs/performance.md) on a local control plane (internal/testenv), side
// by side with the floor it is judged by, in one run:
//
//   - first sync of N generated objects: driftless (the engine in-process,
//     as the agent wires it) against `kubectl apply --server-side` of the
//     same files and against a raw client-go server-side-apply loop at the
//     best concurrency found (the floor);
//   - a one-object change committed to git → applied: latency and the API
//     requests driftless issues for it, picked up at the next interval,
//     after a spec edit that syncs at once, and after a signed GitHub push
//     notice to the agent's webhook receiver (push → applied and → Ready,
//     and the receiver's reply time);
//   - steady state with nothing changing: API requests by verb (driftless's
//     own, counted in its transport, and the API server's view), and CPU;
//   - drift revert latency after kubectl-edit style updates;
//   - the memory of the process running the agent (harness included),
//     extrapolated to 10,000 objects;
//   - the agent binary alone: `driftless agent`, built from this checkout
//     as the Dockerfile builds the image's binary (static, with its build
//     tags; or -agent-binary), run as a process of its own on a control plane
//     of its own, without a forced GC, over one Sync of the largest size's
//     objects and over -syncs Syncs of 10 objects each: its peak RSS over
//     start-up and first syncs (VmHWM) and its steady RSS (every Sync
//     Ready, no request for a few seconds, then the next garbage
//     collection, which the runtime runs at least every two minutes,
//     and a few quiet seconds more), with the file-backed
//     part (the binary's pages) and the Go heap apart, per 1,000 objects
//     and per Sync above idle, and its CPU time until all Ready
//     (-agent-memory=false skips it,
//     -agent-memory-only runs only it); the summary's rss-10k is its peak
//     on one Sync of 10,000 objects or more;
//   - a restart: a new agent over the objects in sync, its writes (0 is
//     the target) and its time from start to serving against one full LIST
//     of the objects (-restart=false skips it);
//   - on control planes of their own, 100 Kustomize overlays in one Sync
//     and a fleet of 1,000 one-app Syncs reading one repository.
//
// It writes bench/results/<date>-<commit>.json, an SVG chart of time and
// memory against objects next to it (-chart FILE.json draws it again),
// and prints a Markdown table ending in a one-line summary. Run it with `make bench` (1,000 objects,
// a few minutes) or `make bench FULL=1` (100, 1,000, 5,000 and 10,000 objects, the last
// timed once);
// docs/performance.md explains the method and the latest figures.
//
// It is a program, not a test: nothing here asserts a timing. `go test`
// runs its phases at a small size against request-count budgets
// (budgets_test.go), and unit tests of the push notice, the chart and the
// summary line.
package main
