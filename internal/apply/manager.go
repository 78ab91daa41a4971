package apply

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/health"
	"github.com/driftless/driftless/internal/plan"
)

// Options configure a Manager.
type Options struct {
	// FieldManager is the server-side apply field manager.
	FieldManager string
	// Owner is the driftless.dev/sync label value of the Sync whose
	// objects this Manager writes; prune deletes only objects carrying it.
	Owner string
	// Concurrency bounds the requests in flight (writes, dry runs, reads,
	// deletes) of one stage of Apply or Prune.
	Concurrency int
	// WaitTimeout bounds waiting for a new CRD to be Established and for
	// a deleted object to be gone before it is re-created.
	WaitTimeout time.Duration
	// DryRun validates and compares everything but writes nothing: Apply
	// and Prune return what they would do.
	DryRun bool
	// Wait says when Apply waits for a wave to be healthy and how it
	// reports the wait.
	Wait WaitOptions
	// BeforeWrite, when set, is called once by Apply after every object
	// passed validation and before the first write: what the caller must
	// do before anything is written (the controller's finalizer, the
	// engine's write-ahead inventory). An error stops Apply with nothing
	// written; Apply returns it wrapped with ErrNotPrepared.
	BeforeWrite func(context.Context) error
	// Written, when set, is told of every object written: its kind,
	// namespace and name, and the metadata the API server returned for
	// this write (UID, resourceVersion, generation, managedFields; not the
	// object's body): the agent recognises its own writes by it
	// (drift.Writes), and marks the state it wrote (drift.LiveMark). It
	// must be safe for concurrent use and must not keep obj.
	Written func(obj *metav1.PartialObjectMetadata)
	// Found, when set, is told of every object a comparison found equal
	// to its desired form (Unchanged), as it was read from the cluster:
	// with Written, every object this Apply verified, and the state it
	// verified. It must be safe for concurrent use and must not keep obj.
	Found func(obj *unstructured.Unstructured)
	// Keep, when set, names objects whose Change keeps the object before
	// and after (Live, Applied) when it is Configured, as a dry run's
	// does: the agent words a drift a sync put back with them. Other
	// written objects keep neither, to bound what a large sync holds.
	Keep func(plan.ID) bool
}

// WaitOptions say when Apply waits for the objects of a wave to be
// healthy (kstatus Current) before it goes on, and how it reports that.
// Between waves it always waits.
type WaitOptions struct {
	// Last makes Apply wait for the last wave too (spec.wait).
	Last bool
	// Timeout bounds each wait; zero waits until the context's deadline,
	// or an hour when it has none.
	Timeout time.Duration
	// Progress, when set, is told when a wave starts waiting and each
	// time its count of healthy objects changes.
	Progress func(WaveProgress)
	// Around, when set, runs each wait: it calls wait, possibly with a
	// context of its own that ends the wait early, and returns its error.
	// The agent lets drift checks run meanwhile, and ends a wait when git
	// moves on.
	Around func(ctx context.Context, w Wave, wait func(context.Context) error) error
	// Checks decide the health of the kinds they name instead of kstatus
	// (a Sync's spec.healthChecks); nil: kstatus for every kind.
	Checks *health.Checks
}

// WaveProgress is how far a wait for one wave has got.
type WaveProgress struct {
	Wave Wave
	// Healthy of the wave's objects are healthy so far.
	Healthy int
}

// FieldManager is the server-side apply field manager driftless writes
// with; a change by any other manager is drift.
const FieldManager = "driftless"

// DefaultConcurrency is how many requests one Sync's apply keeps in
// flight (agent --apply-concurrency). A first sync's dry runs and writes
// keep two cores of a local API server busy only from about 64 on: at 32
// the agent's own share of the machine left a fifth of the slots idle
// (docs/performance.md, round 8).
const DefaultConcurrency = 64

// DefaultOptions returns the options the agent uses.
func DefaultOptions(owner string) Options {
	return Options{FieldManager: FieldManager, Owner: owner, Concurrency: DefaultConcurrency, WaitTimeout: time.Minute}
}

// Manager applies and prunes the objects of one Sync.
type Manager struct {
	client client.Client
	opts   Options
	// fresh holds the Namespaces this Manager created during Apply.
	fresh map[string]bool
}

// NewManager returns a Manager writing through c, a client that can handle
// unstructured objects of any kind the cluster serves.
func NewManager(c client.Client, opts Options) *Manager {
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = time.Minute
	}
	return &Manager{client: c, opts: opts}
}

// byRank runs fn over items one rank at a time, in the given order, with
// up to Concurrency calls in flight within a rank. Results are written
// into a slice by index, so their order is the items' order.
func byRank[T, R any](ctx context.Context, m *Manager, items []T, rank func(T) plan.Rank, fn func(context.Context, T) R) []R {
	out := make([]R, len(items))
	for start := 0; start < len(items); {
		end := start + 1
		for end < len(items) && rank(items[end]) == rank(items[start]) {
			end++
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(m.opts.Concurrency)
		for i := start; i < end; i++ {
			g.Go(func() error {
				out[i] = fn(gctx, items[i])
				return nil
			})
		}
		_ = g.Wait()
		start = end
	}
	return out
}
