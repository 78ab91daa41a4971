package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/testenv"
)

// Request budgets are the deterministic side of the bench: timings are
// noisy on a shared machine, request counts are not. A change that makes
// the agent ask the API server more than these fails make test, whatever
// the clock says.
const (
	// firstSyncPerObject and firstSyncConstant bound a first sync: one
	// dry run and one apply per object, plus discovery, the Sync's own
	// status and events, and watches started for the kinds applied.
	firstSyncPerObject = 2
	firstSyncConstant  = 20
	// oneChangeWrites bounds the writes of a commit that changes one
	// object: the object, then the Sync's status. oneChangeRequests
	// bounds every request (the dry run before the write, an event).
	oneChangeWrites   = 3
	oneChangeRequests = 5
	// revertRequests bounds one drift revert: the apply that puts the
	// object back, the incident in the Sync's status and an event.
	revertRequests = 8
	// revertSyncBytes bounds the bytes one drift revert sends and
	// receives about the Sync (syncs, syncs/status): the incident, as a
	// patch of status.drift and the conditions, and the Sync's metadata
	// back. A copy of the Sync would take more once status.drift is full;
	// the inventory is in the Sync's Inventory, which a revert never
	// touches.
	revertSyncBytes = 8 << 10
	// fleetPerSync and fleetConstant bound the first syncs of a fleet of
	// one-app Syncs (4 objects each, in Namespaces that exist): per
	// Sync, a dry run and an apply per object, its finalizer, the
	// write-ahead inventory, its status and an event; the constant is
	// discovery and the watches.
	fleetPerSync  = 12
	fleetConstant = 20
	// fleetChangeWrites bounds the writes of a commit to one app of the
	// fleet, pushed: each Sync records the new revision (one status
	// write), and the app's one changed object is validated and applied.
	fleetChangeWrites = 2
	// shardsPerSync and shardsConstant bound the requests for Syncs,
	// their Inventories and objects, and events that the API server
	// serves for the sharded fleet's first syncs (every client: the
	// agents, the bench's creates and its watch; not the API server's own
	// lease renewals, nor discovery): per Sync of 10 objects, a dry run
	// and an apply per object, the bench's create, its finalizer, the
	// write-ahead Inventory, its status and an event; the constant is the
	// bench's list and watch of the Syncs.
	shardsPerSync  = 25
	shardsConstant = 8
	// restartPerWritten and restartConstant bound what an agent
	// restarted over objects in sync asks until it settles: discovery and
	// the watches (one list per kind), and a read and a dry run for each
	// object written since the last full comparison (the drift phase's
	// reverts, the one-object change), whose digests the Inventory does
	// not hold yet; nothing for the other objects, which the Inventory's
	// digests and the watches show unchanged. It writes nothing, to the
	// objects, the Sync or its Inventory.
	restartPerWritten = 2
	restartConstant   = 30
)

// TestRequestBudgets runs the bench's phases at a small size against the
// real control plane and the real agent, and checks the requests each
// phase made against the budgets above.
func TestRequestBudgets(t *testing.T) {
	if testing.Short() && !testenv.CI() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := testenv.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	o := options{interval: 2 * time.Second, intervals: 2, edits: 10, limits: clientLimits{}, changeRepeats: 1}
	if o.limits, err = parseLimits("agent"); err != nil {
		t.Fatal(err)
	}
	const size = 100
	b := &bench{o: o, size: size, apps: size / 4, env: env, dir: t.TempDir()}
	if b.admin, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if b.dynamic, err = dynamic.NewForConfig(env.Config); err != nil {
		t.Fatal(err)
	}
	if err := b.install(ctx); err != nil {
		t.Fatal(err)
	}

	run, l, err := b.driftlessFirstSync(ctx, "g", b.o.limits, true, &memResult{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.watch.stop()
		if err := l.agent.stop(); err != nil {
			t.Error(err)
		}
	})
	if run.failed != nil {
		t.Fatalf("first sync failed: %v", run.failed)
	}
	objects := l.work.objects()
	if got, limit := run.requests.total(), firstSyncPerObject*objects+firstSyncConstant; got > limit {
		t.Errorf("first sync of %d objects made %d requests, over the budget of %d (%d per object + %d): %s",
			objects, got, limit, firstSyncPerObject, firstSyncConstant, run.requests)
	}
	t.Logf("first sync of %d objects: %d requests (%s)", objects, run.requests.total(), run.requests)

	c, err := b.oneChange(ctx, l, 1, specEdit)
	if err != nil {
		t.Fatal(err)
	}
	// The spec edit that triggers the sync is the harness's, not counted:
	// the agent's transport sees only the agent.
	if got := c.requests.writes(); got > oneChangeWrites {
		t.Errorf("a one-object change made %d writes, over the budget of %d: %s", got, oneChangeWrites, c.requests)
	}
	if got := c.requests.total(); got > oneChangeRequests {
		t.Errorf("a one-object change made %d requests, over the budget of %d: %s", got, oneChangeRequests, c.requests)
	}
	t.Logf("one-object change: %d requests (%s)", c.requests.total(), c.requests)

	var st steady
	if err := b.steady(ctx, l, &st); err != nil {
		t.Fatal(err)
	}
	if st.Syncs < 1 {
		t.Errorf("no sync ran in %d intervals of steady state: the steady figure measured nothing", st.Intervals)
	}
	if st.Driftless.Total != 0 {
		t.Errorf("steady state: %d syncs made %d requests, want 0: %s", int(st.Syncs), st.Driftless.Total, st.Driftless.ByVerb)
	}

	var d drift
	if err := b.drift(ctx, l, &d); err != nil {
		t.Fatal(err)
	}
	if d.RequestsPerRevert > revertRequests {
		t.Errorf("a drift revert made %.1f requests, over the budget of %d: %s", d.RequestsPerRevert, revertRequests, d.Requests.ByVerb)
	}
	if d.SyncBytesPerRevert > revertSyncBytes {
		t.Errorf("a drift revert sent and received %.0f bytes about the Sync, over the budget of %d: an incident's write must not carry the inventory",
			d.SyncBytesPerRevert, revertSyncBytes)
	}
	t.Logf("drift revert: %.1f requests each (%s), %.0f bytes about the Sync", d.RequestsPerRevert, d.Requests.ByVerb, d.SyncBytesPerRevert)

	var rs restart
	if err := b.restart(ctx, l, &rs); err != nil {
		t.Fatal(err)
	}
	if rs.ManagedWrites != 0 || rs.OtherWrites != 0 {
		t.Errorf("an agent restarted over objects in sync made %d writes to them and %d others (%s), want none: %s",
			rs.ManagedWrites, rs.OtherWrites, rs.OtherDetail, rs.Settled.Detail)
	}
	written := o.edits + 1 // the reverts and the one-object change
	if got, limit := rs.Settled.Total, restartPerWritten*written+restartConstant; got > limit {
		t.Errorf("an agent restarted over %d objects in sync, %d of them written since the last full comparison, made %d requests, over the budget of %d (%d per object written + %d): %s",
			objects, written, got, limit, restartPerWritten, restartConstant, rs.Settled.ByVerb)
	}
	t.Logf("restart: serving after %.2f s (%.1f× one full LIST); %d requests (%s)", rs.Serving, rs.Ratio, rs.Settled.Total, rs.Settled.ByVerb)
}

// TestFleetRequestBudget runs the bench's fleet case with 20 Syncs and
// checks the requests of their first syncs against the budget above.
func TestFleetRequestBudget(t *testing.T) {
	if testing.Short() && !testenv.CI() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := options{repeats: 1, changeRepeats: 1}
	var err error
	if o.limits, err = parseLimits("agent"); err != nil {
		t.Fatal(err)
	}
	const syncs = 20
	f, err := runFleet(ctx, o, syncs)
	if err != nil {
		t.Fatal(err)
	}
	if got, limit := f.Requests.Total, fleetPerSync*syncs+fleetConstant; got > limit {
		t.Errorf("the first syncs of %d Syncs made %d requests, over the budget of %d (%d per Sync + %d): %s",
			syncs, got, limit, fleetPerSync, fleetConstant, f.Requests.Detail)
	}
	t.Logf("the first syncs of %d Syncs: %d requests (%s)", syncs, f.Requests.Total, f.Requests.Detail)
	c := f.Change
	if c.Woken != syncs || c.Renders != 1 || c.Fetches != 1 {
		t.Errorf("a commit to one app, pushed: woke %d Syncs, %.0f renders, %d fetches; want %d, 1 and 1", c.Woken, c.Renders, c.Fetches, syncs)
	}
	if limit := syncs + fleetChangeWrites; c.Writes > limit {
		t.Errorf("a commit to one app, pushed, made %d writes, over the budget of %d (one status write per Sync + %d): %s",
			c.Writes, limit, fleetChangeWrites, c.Requests.Detail)
	}
}

// TestShardedFleetRequestBudget runs the bench's sharded fleet case with
// 16 Syncs over 2 agent processes of the built binary, and checks that
// each shard fetched the one revision once and the requests served until
// every Sync was Ready against the budget above.
func TestShardedFleetRequestBudget(t *testing.T) {
	if testing.Short() && !testenv.CI() {
		t.Skip("starts a control plane and builds the agent binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := agentBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const syncs, shards = 16, 2
	r, err := runShards(ctx, options{}, bin, syncs, shards)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.PerShard {
		if a.Fetches != 1 {
			t.Errorf("shard %s (%d Syncs) made %.0f git fetches for the one revision, want 1", a.Shard, a.Syncs, a.Fetches)
		}
	}
	got := 0.0
	for key, perSync := range r.PerSync {
		if !strings.HasSuffix(key, " leases") && !strings.Contains(key, "non-resource") {
			got += perSync * syncs
		}
	}
	if limit := shardsPerSync*syncs + shardsConstant; int(math.Round(got)) > limit {
		t.Errorf("the first syncs of %d Syncs over %d shards made the API server serve %.0f requests, over the budget of %d (%d per Sync + %d): %s",
			syncs, shards, got, limit, shardsPerSync, shardsConstant, r.Requests.Detail)
	}
	t.Logf("%d Syncs over %d shards: %.0f requests served (%s)", syncs, shards, got, r.Requests.Detail)
}
