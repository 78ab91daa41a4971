package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/controller"
	imagecontroller "github.com/driftless/driftless/internal/controller/image"
	"github.com/driftless/driftless/internal/receiver"
)

// rootSyncName is the name of the Sync the Git* options create.
const rootSyncName = "default"

// Agent is the driftless agent: the controller manager with the Sync,
// drift and image controllers, and, as the options ask, the webhook
// receiver and the admission webhook.
type Agent struct {
	opts    Options
	cfg     *rest.Config
	checked checked
	direct  client.Client
	mgr     ctrl.Manager
	syncs   *controller.SyncReconciler
	// memLimit is the Go soft memory limit set from the container's.
	memLimit int64
	// gcPercent is the GOGC the agent set, 0 when the environment's stands.
	gcPercent int
	// limit is the client-side rate limit of its API clients.
	limit ClientLimit
	// log is this run's log writer (see agentLog).
	log *logRun
}

// New checks o, points the process's controller-runtime log at o.LogTo,
// sets the Go runtime's soft memory limit from the container's, and
// connects a client; it does not yet talk to the API server (Run does).
func New(o Options) (_ *Agent, err error) {
	checked, err := o.check()
	if err != nil {
		return nil, err
	}
	if o.Config == nil {
		return nil, errors.New("agent: no API server configuration")
	}
	if o.LogTo == nil {
		o.LogTo = os.Stderr
	}
	encoder := zap.ConsoleEncoder()
	if o.LogFormat == "json" {
		encoder = zap.JSONEncoder()
	}
	a := &Agent{opts: o, log: &logRun{logger: zap.New(encoder, zap.WriteTo(o.LogTo))}}
	// The log goes to o.LogTo from here until Serve returns.
	agentLog.set(a.log)
	defer func() {
		if err != nil {
			agentLog.release(a.log)
		}
	}()
	cfg := rest.CopyConfig(o.Config)
	a.memLimit = setSoftMemoryLimit()
	a.gcPercent = setGCPercent()
	// Writes without a field manager of their own are recorded as
	// "driftless" (the default is the binary's name), which the admission
	// webhook recognises as the agent's.
	cfg.UserAgent = "driftless/" + o.Version
	a.limit = chooseClientLimit(context.Background(), cfg, o.QPS, o.Burst)
	a.limit.apply(cfg)
	if a.opts.Namespace == "" {
		a.opts.Namespace = os.Getenv("POD_NAMESPACE")
	}
	if a.opts.Namespace == "" {
		a.opts.Namespace = "driftless-system"
	}

	if a.direct, err = client.New(cfg, client.Options{Scheme: v1alpha1.NewScheme()}); err != nil {
		return nil, fmt.Errorf("connect to the API server %s: %w", cfg.Host, err)
	}
	a.cfg, a.checked = cfg, checked
	return a, nil
}

// Setup assembles the agent on a controller manager: the Sync, drift and
// image controllers, notifications, the webhook receiver, the dashboard
// and the probes.
// The CRDs must be installed (Install): the manager's cache asks the API
// server about their kinds.
func (a *Agent) Setup() error {
	mgr, err := a.newManager()
	if err != nil {
		return fmt.Errorf("create controller manager: %w", err)
	}
	a.mgr = mgr
	var wake chan controller.WakeUp
	if a.opts.WebhookAddr != "" || a.checked.shard != nil {
		// A sharded agent is also woken by the pushes another shard's
		// receiver took (receiver.Relay).
		wake = make(chan controller.WakeUp)
	}
	if err := a.setupControllers(wake); err != nil {
		return err
	}
	relay, err := a.setupRelay(wake)
	if err != nil {
		return err
	}
	if err := a.setupReceiver(wake, relay); err != nil {
		return err
	}
	if a.opts.UIAddr != "" {
		d, err := a.newDashboard()
		if err != nil {
			return err
		}
		if err := mgr.Add(d); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return nil
}

// newManager creates the agent's controller manager: metrics, probes,
// leader election (one lease per shard) and a cache of what the agent's
// shard manages.
func (a *Agent) newManager() (ctrl.Manager, error) {
	o, checked := a.opts, a.checked
	// A process runs one agent, so the controller's name is unique
	// without the global check, which would refuse a second agent started
	// in the same process (as tests do).
	skipNameValidation := true
	return ctrl.NewManager(a.cfg, ctrl.Options{
		Scheme:                        a.direct.Scheme(),
		Controller:                    config.Controller{SkipNameValidation: &skipNameValidation},
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              checked.shard.LeaseName(),
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		// Syncs, ImagePolicies, and the metadata of managed objects (by
		// label) for drift watches, of the agent's shard: nothing
		// unmanaged is cached.
		Cache: imagecontroller.CacheOptions(controller.ShardCacheOptions(checked.shard), checked.shard.SyncSelector()),
	})
}

// setupControllers sets up the Sync and drift controllers (woken by
// wake, when not nil) and the image controllers, which share the Sync
// controller's git mirror, readers and notifications.
func (a *Agent) setupControllers(wake chan controller.WakeUp) error {
	o, checked := a.opts, a.checked
	var err error
	a.syncs, err = controller.Setup(a.mgr, controller.Options{
		Shard:            checked.shard,
		CacheDir:         o.CacheDir,
		CacheMaxSize:     checked.cacheMaxSize,
		DryRun:           o.DryRun,
		Concurrency:      o.Concurrency,
		ApplyConcurrency: o.ApplyConcurrency,
		FullResync:       o.FullResync,
		RenderBudgets:    o.RenderBudgets,
		Wake:             wake,
		Notify:           checked.notifications,
		NotifyState:      client.ObjectKey{Namespace: o.Namespace, Name: v1alpha1.NotifyStateConfigMap},
		Tenancy: &controller.Tenancy{
			AgentNamespace:        o.Namespace,
			DefaultServiceAccount: o.DefaultServiceAccount,
			CrossNamespaceRefs:    !o.NoCrossNamespaceRefs,
			FileURLs:              o.AllowFileURLs,
			SourceHosts:           checked.sourceHosts,
		},
		DefaultAgeKey: checked.ageKey,
	})
	if err != nil {
		return err
	}
	exportFetches(a.syncs.Mirror())
	imageOpts := imagecontroller.DefaultOptions()
	imageOpts.CacheDir = o.CacheDir
	imageOpts.Mirror = a.syncs.Mirror()
	imageOpts.ReaderOf = a.syncs.ReaderOf
	imageOpts.Notify = a.syncs.Notify
	imageOpts.AgentNamespace = o.Namespace
	return imagecontroller.Setup(a.mgr, imageOpts)
}

// setupRelay adds, for a sharded agent, the relay that passes the pushes
// its receiver takes to the other shards' agents and wakes its own Syncs
// (wake) with theirs; nil for an agent that is not sharded.
func (a *Agent) setupRelay(wake chan controller.WakeUp) (*receiver.Relay, error) {
	if a.checked.shard == nil {
		return nil, nil
	}
	mgr := a.mgr
	watcher, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	relay, err := receiver.NewRelay(receiver.RelayOptions{
		Client:    watcher,
		Namespace: a.opts.Namespace,
		Shard:     a.checked.shard.Name,
		Syncs:     mgr.GetClient(),
		Wake:      wake,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(relay); err != nil {
		return nil, err
	}
	return relay, nil
}

// setupReceiver adds the webhook receiver when Options.WebhookAddr asks
// for it: it wakes Syncs through wake and, when not nil, passes pushes on
// to the other shards through relay.
func (a *Agent) setupReceiver(wake chan controller.WakeUp, relay *receiver.Relay) error {
	o, mgr := a.opts, a.mgr
	if o.WebhookAddr == "" {
		return nil
	}
	hooks, err := receiver.New(receiver.Options{
		Addr:           o.WebhookAddr,
		Secret:         types.NamespacedName{Namespace: o.Namespace, Name: o.WebhookSecret},
		Syncs:          mgr.GetClient(),
		Secrets:        mgr.GetAPIReader(),
		Wake:           wake,
		Elected:        mgr.Elected(),
		Recorder:       mgr.GetEventRecorder("driftless-webhook-receiver"),
		Limits:         receiver.DefaultLimits(),
		TrustedProxies: a.checked.trustedProxies,
		Relay:          relay,
	})
	if err != nil {
		return err
	}
	return mgr.Add(hooks)
}

// Run installs (Install), assembles (Setup) and serves (Serve) until ctx
// is done. It returns nil after a clean shutdown. An agent runs once.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.Install(ctx); err != nil {
		agentLog.release(a.log)
		return err
	}
	if err := a.Setup(); err != nil {
		agentLog.release(a.log)
		return err
	}
	return a.Serve(ctx)
}

// Install creates or updates the CRDs and the Sync admission policy, the
// agent's namespace and the root Sync, waiting until the CRDs are
// Established.
func (a *Agent) Install(ctx context.Context) error {
	return install(ctx, a.direct, a.opts)
}

// Serve starts the admission webhook if asked and runs what Setup
// assembled: the controllers,
// the webhook receiver and the probes until ctx is done. It returns nil
// after a clean shutdown.
func (a *Agent) Serve(ctx context.Context) error {
	defer agentLog.release(a.log)
	o := a.opts
	if o.Admission {
		hook, err := admissionServer(ctx, a.mgr, a.direct, o)
		if err != nil {
			return err
		}
		if err := a.mgr.Add(hook); err != nil {
			return err
		}
		a.syncs.HoldStamps = hook // before the manager starts the reconcilers
	}
	ctrl.Log.Info("driftless agent starting", "version", o.Version, "apiServer", a.mgr.GetConfig().Host, "namespace", o.Namespace,
		"shard", a.checked.shard.String(), "leaderElection", o.LeaderElect, "lease", a.checked.shard.LeaseName(), "leaseDuration", o.LeaseDuration, "dryRun", o.DryRun, "goMemoryLimitFromContainer", a.memLimit, "gogc", a.gcPercent,
		"clientRateLimit", a.limit.String())
	return a.mgr.Start(ctx)
}

// ClientLimit is the client-side rate limit of the agent's API clients,
// as New chose it.
func (a *Agent) ClientLimit() ClientLimit { return a.limit }

// Namespace is the agent's namespace.
func (a *Agent) Namespace() string { return a.opts.Namespace }

// Syncs is the agent's Sync controller (its git mirror's counts), once
// Setup has run.
func (a *Agent) Syncs() *controller.SyncReconciler { return a.syncs }

// WaitForCacheSync waits, once Serve runs, until the agent's caches are
// synced, or ctx is done; it reports whether they are.
func (a *Agent) WaitForCacheSync(ctx context.Context) bool {
	return a.mgr.GetCache().WaitForCacheSync(ctx)
}

// agentLog is where the agent logs. controller-runtime keeps the first
// logger a process sets (ctrl.SetLogger fulfils its loggers once) and,
// when none is set within 30 s of the first log call, sets one that
// discards for good. So the process's logger is set when this package
// loads (init), and sends each record to the current run's logger: a
// production process runs the agent once; a test binary runs it many
// times, each test keeping its agent's log in its own format; between
// runs (or in commands other than agent) records are dropped.
var agentLog = &logSwitch{}

func init() { ctrl.SetLogger(logr.New(&runSink{sw: agentLog})) }

// logSwitch holds the current run, or none between runs.
type logSwitch struct{ run atomic.Pointer[logRun] }

// logRun is one agent run's logger (its format and writer).
type logRun struct{ logger logr.Logger }

// set makes run the one the log goes to.
func (s *logSwitch) set(run *logRun) { s.run.Store(run) }

// release stops the log going to run, unless another run has taken it
// since: an agent that stops late (a test's agent slow to shut down)
// does not silence the next one.
func (s *logSwitch) release(run *logRun) { s.run.CompareAndSwap(run, nil) }

func (s *logSwitch) current() *logRun { return s.run.Load() }

// runSink is the process's log sink: it hands each record, with the
// names and values given to it, to the current run's logger.
//
// The run's logger with those names and values is built once per sink
// and run, not on each record: controller-runtime gives each reconcile a
// logger with values, and zap encodes values when they are added, so
// building it for every record (and, before, for every check of a level
// that logs nothing) cost the agent about 4% of its CPU over a fleet of
// 1,000 first syncs.
type runSink struct {
	sw     *logSwitch
	names  []string
	values []any
	built  atomic.Pointer[builtSink]
}

// builtSink is run's logger with a runSink's names and values.
type builtSink struct {
	run  *logRun
	sink logr.LogSink
}

func (s *runSink) Init(logr.RuntimeInfo) {}

// sink is the current run's logger with s's names and values, nil
// between runs.
func (s *runSink) sink() logr.LogSink {
	run := s.sw.current()
	if run == nil {
		return nil
	}
	if b := s.built.Load(); b != nil && b.run == run {
		return b.sink
	}
	l := run.logger
	for _, n := range s.names {
		l = l.WithName(n)
	}
	if len(s.values) > 0 {
		l = l.WithValues(s.values...)
	}
	s.built.Store(&builtSink{run: run, sink: l.GetSink()})
	return l.GetSink()
}

// Enabled asks the run's logger as it is: names and values do not change
// which levels it writes.
func (s *runSink) Enabled(level int) bool {
	run := s.sw.current()
	return run != nil && run.logger.GetSink() != nil && run.logger.GetSink().Enabled(level)
}

func (s *runSink) Info(level int, msg string, kv ...any) {
	if l := s.sink(); l != nil {
		l.Info(level, msg, kv...)
	}
}

func (s *runSink) Error(err error, msg string, kv ...any) {
	if l := s.sink(); l != nil {
		l.Error(err, msg, kv...)
	}
}

func (s *runSink) WithValues(kv ...any) logr.LogSink {
	return &runSink{sw: s.sw, names: s.names, values: append(slices.Clip(s.values), kv...)}
}

func (s *runSink) WithName(name string) logr.LogSink {
	return &runSink{sw: s.sw, names: append(slices.Clip(s.names), name), values: s.values}
}
