package controller

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/notify"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/charts"
)

// Client-side limits of the agent's API clients when the API server does
// not apply API Priority and Fairness (when it does, it protects itself,
// and the agent sets none: internal/agent's ClientLimit). A low limit
// only makes a large first sync wait for itself: at 10,100 objects, on a
// two-core local API server, 500 per second did (docs/performance.md,
// round 8).
const (
	DefaultKubeAPIQPS   = 500
	DefaultKubeAPIBurst = 1000
)

// DefaultConcurrency is how many Syncs are reconciled at once by
// default. A sync spends most of its time waiting for the API server and
// the git remote, not computing: on two cores, a fleet of 1,000 small
// Syncs became Ready 1.2 to 2.1 times sooner at 16 than at 4 (bench,
// fleet case: 69 s against 42-58 s, and 288 s against 134 s on a
// heavily loaded machine), and 32 did not do better. Argo CD runs 20
// status and 10 operation processors by default.
const DefaultConcurrency = 16

// Options configure the agent's controllers.
type Options struct {
	// Shard is the agent's shard (agent --shard): the drift watches of
	// remote clusters list only its Syncs' objects, as the manager's
	// cache (ShardCacheOptions) does here. nil: every Sync.
	Shard *Shard
	// CacheDir holds the git mirrors (see source.Mirror).
	CacheDir string
	// CacheMaxSize bounds the git mirrors and charts in CacheDir, in
	// bytes (source.CacheLimit); zero or less means no bound.
	CacheMaxSize int64
	// DryRun makes every Sync report instead of write.
	DryRun bool
	// Concurrency is how many Syncs, and how many drifted objects, are
	// handled at once (DefaultConcurrency).
	Concurrency int
	// ApplyConcurrency is how many requests one sync keeps in flight
	// (apply.DefaultConcurrency).
	ApplyConcurrency int
	// FullResync is how often a Sync compares every object even when git
	// did not change and the watches saw nothing.
	FullResync time.Duration
	// RenderBudgets bound each render (files, documents, objects, bytes).
	RenderBudgets render.Budgets
	// Wake, when set, is read by the Sync controller: each wake-up
	// enqueues a reconcile of its Sync at once, as if its interval had
	// elapsed, at what its ref points to after the notice (the webhook
	// receiver, internal/receiver, writes to it).
	Wake <-chan WakeUp
	// Notify, when it has targets, sends notifications about Syncs
	// (internal/notify): every event still goes to the API server.
	Notify notify.Config
	// NotifyState, when set, names the ConfigMap that keeps the
	// notifications' dedup state across restarts (the agent's
	// driftless-notify-state); empty keeps it in memory only.
	NotifyState client.ObjectKey
	// Tenancy, when set, fences the Syncs outside the agent's namespace
	// and makes every Sync act as its ServiceAccount (docs/security.md).
	// Nil: every Sync acts as the agent, unfenced.
	Tenancy *Tenancy
	// DriftPolicy is when drift reverts back off from a fight with
	// another writer (drift.DefaultPolicy); the zero value is the default.
	DriftPolicy drift.Policy
	// DefaultAgeKey names the default key Secret for Syncs in its
	// namespace that set no spec.decryption.secretRef (agent
	// --sops-age-key-secret); empty means none.
	DefaultAgeKey client.ObjectKey
}

// DefaultOptions returns the agent's defaults.
func DefaultOptions() Options {
	return Options{CacheDir: filepath.Join(os.TempDir(), "driftless"), CacheMaxSize: source.DefaultCacheMaxSize, Concurrency: DefaultConcurrency, ApplyConcurrency: apply.DefaultConcurrency, FullResync: time.Hour,
		RenderBudgets: render.DefaultBudgets()}
}

// CacheOptions is the manager cache the controllers need: Syncs, and the
// metadata of objects labelled driftless.dev/sync — nothing unmanaged.
// Every Sync is served; ShardCacheOptions serves one shard.
func CacheOptions() cache.Options { return ShardCacheOptions(nil) }

// Setup registers the Sync and drift controllers with mgr, whose cache
// must be built from CacheOptions.
func Setup(mgr ctrl.Manager, opts Options) (*SyncReconciler, error) {
	clientOptions := client.Options{Scheme: mgr.GetScheme(), Mapper: newMappingCache(mgr.GetRESTMapper()), HTTPClient: mgr.GetHTTPClient()}
	applier, err := client.New(mgr.GetConfig(), clientOptions)
	if err != nil {
		return nil, err
	}
	var identities *Identities
	if opts.Tenancy != nil {
		identities = NewIdentities(*opts.Tenancy, applier, mgr.GetConfig(), clientOptions)
	}
	var recorder EventRecorder = mgr.GetEventRecorder("driftless")
	var revisions RevisionReporter
	var notifier *notify.Dispatcher
	if len(opts.Notify.Targets) > 0 {
		nopts := notify.DefaultOptions()
		if opts.NotifyState.Name != "" {
			nopts.State = &notify.ConfigMapState{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Key: opts.NotifyState}
		}
		notifier = notify.NewDispatcher(opts.Notify, nopts)
		if err := mgr.Add(notifier); err != nil {
			return nil, err
		}
		recorder = notify.Wrap(recorder, notifier)
		revisions = notifier
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	clusters := NewClusters(mgr.GetScheme(), opts.Tenancy)
	store := NewStore()
	syncs := &SyncReconciler{
		Client:     mgr.GetClient(),
		Reader:     mgr.GetAPIReader(),
		Applier:    applier,
		Identities: identities,
		Clusters:   clusters,
		RenderOptions: engine.RenderOptions{Scope: engine.MapperScope{Mapper: mgr.GetRESTMapper()}, Budgets: opts.RenderBudgets,
			ChartCache: &charts.Fetcher{Dir: filepath.Join(opts.CacheDir, "charts")}},
		Discovery:        dc,
		Store:            store,
		Recorder:         recorder,
		Revisions:        revisions,
		CacheDir:         opts.CacheDir,
		DryRun:           opts.DryRun,
		ApplyConcurrency: opts.ApplyConcurrency,
		FullResync:       opts.FullResync,
		DefaultAgeKey:    opts.DefaultAgeKey,
		notifier:         notifier,
	}
	policy := opts.DriftPolicy
	if policy == (drift.Policy{}) {
		policy = drift.DefaultPolicy()
	}
	drifts := &DriftReconciler{
		Client:     mgr.GetClient(),
		Applier:    applier,
		Identities: identities,
		Clusters:   clusters,
		Recorder:   recorder,
		Reader:     mgr.GetAPIReader(),
		Store:      store,
		DryRun:     opts.DryRun,
		Policy:     policy,
		History:    drift.NewHistory(policy.Window + policy.MaxBackoff),
	}
	syncs.Fights = drifts.History
	limit := &source.CacheLimit{MaxSize: opts.CacheMaxSize, Mirror: syncs.Mirror(), ChartDir: syncs.RenderOptions.ChartCache.Dir}
	collect := func() { limit.Collect() }
	syncs.Mirror().AfterFetch = collect
	syncs.RenderOptions.ChartCache.AfterDownload = collect
	watches, err := SetupDriftWithManager(mgr, drifts, opts.Concurrency)
	if err != nil {
		return nil, err
	}
	syncs.Watches = watches
	clusters.watches = watches.remote
	clusters.shard = opts.Shard
	// The remote clusters' watches end with the manager.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		clusters.Stop()
		return nil
	})); err != nil {
		return nil, err
	}
	if err := syncs.SetupWithManager(mgr, opts.Concurrency, opts.Wake); err != nil {
		return nil, err
	}
	if err := mgr.Add(reportStatus(mgr.GetCache())); err != nil {
		return nil, err
	}
	return syncs, nil
}
