package cli

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/controller"
	imagecontroller "github.com/driftless/driftless/internal/controller/image"
	"github.com/driftless/driftless/internal/notify"
	"github.com/driftless/driftless/internal/receiver"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// agentOptions are the flags of `driftless agent`.
type agentOptions struct {
	kubeconfig   string
	namespace    string
	gitURL       string
	gitBranch    string
	gitPaths     []string
	gitSecret    string
	syncWait     bool
	syncInterval time.Duration
	insecureHost bool

	leaderElect   bool
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	metricsAddr   string
	probeAddr     string
	logFormat     string
	// logTo is where the log goes: the command's standard error.
	logTo          io.Writer
	cacheDir       string
	cacheMaxSize   string
	concurrent     int
	dryRun         bool
	fullResync     time.Duration
	qps            float32
	burst          int
	leaderElectOn  bool // whether --leader-elect was given
	budgets        render.Budgets
	webhookAddr    string
	webhookSecret  string
	sopsAgeKey     string
	webhookProxies []string
	notifyConfig   string
	clusterName    string

	syncServiceAccount    string
	defaultServiceAccount string
	noCrossNamespaceRefs  bool
	allowFileURLs         bool
	tenantSourceHosts     []string
	admission             bool
	admissionAddr         string
	admissionURL          string
	admissionBreakGlass   string
}

const rootSyncName = "default"

// NotifyStateConfigMap, in the agent's namespace, keeps what the
// notifications sent, so that a restart does not send an open failure
// again (docs/notifications.md).
const NotifyStateConfigMap = "driftless-notify-state"

func newAgentCommand() *cobra.Command {
	o := &agentOptions{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the driftless controller: keep the cluster equal to git",
		Long: `Run the driftless agent, the controller that serves Sync objects.

At start it installs (or updates) the Sync CRD. It then syncs every Sync in
the cluster: fetch the git revision, render the manifests, validate them all
with a server-side dry-run, apply what differs with server-side apply (field
manager "driftless"), and prune what was removed from git.

With --git-url it also creates a root Sync named "default" in its namespace
from the Flux-v1-style flags, so a Flux v1 Deployment works with only its
image and command changed:

  driftless agent --git-url=ssh://git@github.com/org/fleet.git \
    --git-branch=master --git-path=namespaces,workloads \
    --sync-interval=1m --git-secret=flux-git-deploy

The git Secret holds "identity" (the SSH deploy key) and "known_hosts" for
SSH, or "username" and "password"/"token" for HTTPS.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.leaderElectOn = cmd.Flags().Changed("leader-elect")
			o.logTo = cmd.ErrOrStderr()
			ctx, stop := withShutdownSignals(cmd.Context())
			defer stop()
			return runAgent(ctx, o)
		},
	}
	defaults := controller.DefaultOptions()
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.namespace, "namespace", "", "the agent's namespace, for the root Sync and leader election (default: the pod's namespace, else driftless-system; created if missing)")
	f.StringVar(&o.gitURL, "git-url", "", "repository of the root Sync (ssh://, https:// or file://); without it only user-created Syncs are served")
	f.StringVar(&o.gitBranch, "git-branch", "master", "branch of the root Sync")
	f.StringSliceVar(&o.gitPaths, "git-path", nil, "comma-separated paths in the repository to apply (default: the whole repository)")
	f.StringVar(&o.gitSecret, "git-secret", "", "Secret in the agent's namespace with the root Sync's git credentials")
	f.BoolVar(&o.syncWait, "sync-wait", false, "the root Sync is Ready only when every object it applied is healthy (rolled out and available)")
	f.DurationVar(&o.syncInterval, "sync-interval", 5*time.Minute, "interval of the root Sync")
	f.StringVar(&o.syncServiceAccount, "sync-service-account", "", "ServiceAccount in the agent's namespace the root Sync acts as (its spec.serviceAccountName); empty: the agent's own identity")
	f.BoolVar(&o.insecureHost, "git-insecure-skip-host-key-check", false, "accept any SSH host key for the root Sync (not recommended)")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader among agent replicas; on by default when running in a cluster (set --leader-elect=false to turn it off there), off elsewhere")
	f.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits, after the leader last renewed the Lease, before it takes over: a killed leader's Syncs and drift reverts stop for about this long")
	f.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew the Lease before it gives up leading (and exits); less than --leader-elect-lease-duration")
	f.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often the leader renews the Lease and a standby tries to take it")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables them")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.cacheDir, "cache-dir", defaults.CacheDir, "directory for git mirrors: one per repository and credentials, shared by the Syncs that read it, with a tree per revision")
	f.StringVar(&o.cacheMaxSize, "cache-max-size", resource.NewQuantity(defaults.CacheMaxSize, resource.BinarySI).String(), "bound on the git mirrors and charts in --cache-dir (a quantity: 2Gi, 512Mi; 0 for none): past it, the least recently used mirror or chart not in use is removed after each fetch, and fetched again when needed")
	f.IntVar(&o.concurrent, "concurrent", defaults.Concurrency, "Syncs reconciled at the same time, and drifted objects checked at the same time (each sync mostly waits for the API server and git, so more than the cores pays off for fleets of many Syncs)")
	f.Float32Var(&o.qps, "kube-api-qps", controller.DefaultKubeAPIQPS, "requests per second the agent may send to the API server (client side; the server's priority and fairness still applies)")
	f.IntVar(&o.burst, "kube-api-burst", controller.DefaultKubeAPIBurst, "burst of requests above --kube-api-qps")
	f.BoolVar(&o.dryRun, "dry-run", false, "write nothing: report what every Sync would create, change, prune and revert (events, status, condition Drifted)")
	f.DurationVar(&o.fullResync, "full-resync-interval", defaults.FullResync, "how often a Sync compares every object even when git did not change and the drift watches saw nothing")
	addBudgetFlags(f, &o.budgets)
	f.StringVar(&o.defaultServiceAccount, "default-service-account", "", "ServiceAccount (of the Sync's own namespace) a Sync outside the agent's namespace acts as when it names none in spec.serviceAccountName; empty refuses such Syncs (Stalled, ServiceAccountRequired) (docs/security.md)")
	f.BoolVar(&o.noCrossNamespaceRefs, "no-cross-namespace-refs", true, "refuse (InvalidSpec) a Sync outside the agent's namespace whose spec.dependsOn names another namespace")
	f.BoolVar(&o.allowFileURLs, "allow-file-urls", false, "let Syncs outside the agent's namespace use file:// sources, which read the agent's filesystem (tests, demos); without it only the agent's namespace may")
	f.StringSliceVar(&o.tenantSourceHosts, "tenant-source-hosts", nil, "comma-separated host patterns (github.com, *.corp.example) that Syncs outside the agent's namespace may fetch git repositories, charts (repository, registry and the download URLs of an index) and remote Kustomize bases from; any other host is refused, naming it (docs/security.md); empty allows every host")
	f.StringVar(&o.webhookAddr, "webhook-bind-address", "", "address of the webhook receiver (/hooks/github, /hooks/gitlab, /hooks/gitea, /hooks/bitbucket, /hooks/generic), such as :9292: a push wakes the Syncs that follow the pushed branch or tag at once (docs/webhooks.md); empty disables it")
	f.StringVar(&o.webhookSecret, "webhook-secret", "", "Secret in the agent's namespace with the webhook secrets: one key per provider (github, gitlab, gitea, bitbucket, generic), or the key token for all; required with --webhook-bind-address")
	f.StringVar(&o.sopsAgeKey, "sops-age-key-secret", "", "Secret, as namespace/name, whose *.agekey entries decrypt SOPS files for the Syncs in its namespace that set no spec.decryption.secretRef (the root Sync); empty means none (docs/secrets.md)")
	f.StringSliceVar(&o.webhookProxies, "webhook-trusted-proxies", nil, "comma-separated CIDRs of the proxies in front of the webhook receiver (an Ingress): requests from them are rate-limited by their X-Forwarded-For sender; empty limits by the TCP peer")
	f.StringVar(&o.notifyConfig, "notify-config", "", "YAML file of notification targets (Slack, Teams, generic webhook, GitHub/GitLab/Gitea commit statuses), the Syncs and events each receives, and the dedup settings (docs/notifications.md); empty sends none")
	f.StringVar(&o.clusterName, "cluster-name", notify.DefaultCluster, "name of this cluster in commit statuses (driftless/<cluster>/<namespace>/<name>, docs/notifications.md)")
	addAdmissionFlags(f, o)
	return cmd
}

// withShutdownSignals returns a context cancelled by SIGINT or SIGTERM.
// Once it is done the signals get their default action back, so a second
// signal ends the process at once. Unlike ctrl.SetupSignalHandler it may
// be called more than once in a process.
func withShutdownSignals(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// runAgent runs the agent until ctx is done. It returns nil after a clean
// shutdown.
func runAgent(ctx context.Context, o *agentOptions) error {
	if o.logTo == nil {
		o.logTo = os.Stderr
	}
	var encoder zap.Opts
	switch o.logFormat {
	case "json":
		encoder = zap.JSONEncoder()
	case "text":
		encoder = zap.ConsoleEncoder()
	default:
		return fmt.Errorf("unknown --log-format %q: use text or json", o.logFormat)
	}
	for _, p := range o.webhookProxies {
		if _, err := netip.ParsePrefix(strings.TrimSpace(p)); err != nil {
			return fmt.Errorf("--webhook-trusted-proxies %q: write CIDRs such as 10.0.0.0/8,fd00::/8: %w", p, err)
		}
	}
	if o.retryPeriod <= 0 || o.retryPeriod >= o.renewDeadline || o.renewDeadline >= o.leaseDuration {
		return fmt.Errorf("leader election: --leader-elect-retry-period %s, --leader-elect-renew-deadline %s, --leader-elect-lease-duration %s: each must be shorter than the next",
			o.retryPeriod, o.renewDeadline, o.leaseDuration)
	}
	cacheMaxSize, err := resource.ParseQuantity(o.cacheMaxSize)
	if err != nil || cacheMaxSize.Sign() < 0 {
		return fmt.Errorf("--cache-max-size %q: write a size such as 2Gi or 512Mi (0 for no bound)", o.cacheMaxSize)
	}
	sourceHosts, err := source.ParseHosts(o.tenantSourceHosts)
	if err != nil {
		return fmt.Errorf("--tenant-source-hosts: %w", err)
	}
	if o.webhookAddr != "" && o.webhookSecret == "" {
		return fmt.Errorf("--webhook-bind-address needs --webhook-secret: name the Secret in the agent's namespace that holds the webhook secrets (docs/webhooks.md)")
	}
	var ageKey client.ObjectKey
	if o.sopsAgeKey != "" {
		ns, name, ok := strings.Cut(o.sopsAgeKey, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--sops-age-key-secret %q: write namespace/name, such as driftless-system/sops-age", o.sopsAgeKey)
		}
		ageKey = client.ObjectKey{Namespace: ns, Name: name}
	}
	var notifications notify.Config
	if o.notifyConfig != "" {
		loaded, err := notify.LoadConfig(o.notifyConfig)
		if err != nil {
			return err
		}
		notifications = loaded
	}
	if strings.TrimSpace(o.clusterName) == "" || strings.ContainsAny(o.clusterName, " /") {
		return fmt.Errorf("--cluster-name %q: give a name without spaces or slashes, such as prod-eu", o.clusterName)
	}
	notifications.Cluster = o.clusterName
	agentLog.set(o.logTo)
	defer agentLog.set(io.Discard)
	setAgentLogger.Do(func() { ctrl.SetLogger(zap.New(encoder, zap.WriteTo(agentLog))) })
	cfg, inCluster, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	memLimit := setSoftMemoryLimit()
	cfg.QPS, cfg.Burst = o.qps, o.burst
	// Writes without a field manager of their own are recorded as
	// "driftless" (the default is the binary's name), which the admission
	// webhook recognises as the agent's.
	cfg.UserAgent = "driftless/" + version
	if o.namespace == "" {
		o.namespace = os.Getenv("POD_NAMESPACE")
	}
	if o.namespace == "" {
		o.namespace = "driftless-system"
	}
	if !o.leaderElectOn {
		o.leaderElect = inCluster
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("connect to the API server %s: %w", cfg.Host, err)
	}
	if err := install(ctx, direct, o); err != nil {
		return err
	}

	// A process runs one agent, so the controller's name is unique
	// without the global check, which would refuse a second agent started
	// in the same process (as tests do).
	skipNameValidation := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Controller:                    config.Controller{SkipNameValidation: &skipNameValidation},
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "driftless-agent",
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		// Syncs, ImagePolicies, and the metadata of managed objects (by
		// label) for drift watches: nothing unmanaged is cached.
		Cache: imagecontroller.CacheOptions(controller.CacheOptions()),
	})
	if err != nil {
		return fmt.Errorf("create controller manager: %w", err)
	}
	var wake chan event.TypedGenericEvent[*v1alpha1.Sync]
	if o.webhookAddr != "" {
		wake = make(chan event.TypedGenericEvent[*v1alpha1.Sync])
	}
	syncs, err := controller.Setup(mgr, controller.Options{
		CacheDir:      o.cacheDir,
		CacheMaxSize:  cacheMaxSize.Value(),
		DryRun:        o.dryRun,
		Concurrency:   o.concurrent,
		FullResync:    o.fullResync,
		RenderBudgets: o.budgets,
		Wake:          wake,
		Notify:        notifications,
		NotifyState:   client.ObjectKey{Namespace: o.namespace, Name: NotifyStateConfigMap},
		Tenancy: &controller.Tenancy{
			AgentNamespace:        o.namespace,
			DefaultServiceAccount: o.defaultServiceAccount,
			CrossNamespaceRefs:    !o.noCrossNamespaceRefs,
			FileURLs:              o.allowFileURLs,
			SourceHosts:           sourceHosts,
		},
		DefaultAgeKey: ageKey,
	})
	if err != nil {
		return err
	}
	imageOpts := imagecontroller.DefaultOptions()
	imageOpts.CacheDir = o.cacheDir
	imageOpts.Mirror = syncs.Mirror()
	imageOpts.ReaderOf = syncs.ReaderOf
	imageOpts.AgentNamespace = o.namespace
	if err := imagecontroller.Setup(mgr, imageOpts); err != nil {
		return err
	}
	if wake != nil {
		hooks, err := receiver.New(receiver.Options{
			Addr:           o.webhookAddr,
			Secret:         types.NamespacedName{Namespace: o.namespace, Name: o.webhookSecret},
			Syncs:          mgr.GetClient(),
			Secrets:        mgr.GetAPIReader(),
			Wake:           wake,
			Elected:        mgr.Elected(),
			Recorder:       mgr.GetEventRecorder("driftless-webhook-receiver"),
			Limits:         receiver.DefaultLimits(),
			TrustedProxies: trustedProxies(o.webhookProxies),
		})
		if err != nil {
			return err
		}
		if err := mgr.Add(hooks); err != nil {
			return err
		}
	}
	if o.admission {
		hook, err := admissionServer(ctx, mgr, direct, o)
		if err != nil {
			return err
		}
		if err := mgr.Add(hook); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("driftless agent starting", "version", version, "apiServer", cfg.Host, "namespace", o.namespace,
		"leaderElection", o.leaderElect, "leaseDuration", o.leaseDuration, "dryRun", o.dryRun, "goMemoryLimitFromContainer", memLimit)
	return mgr.Start(ctx)
}

// restConfig loads the cluster of --kubeconfig by the rule every command
// follows (clusterFlags.load). It reports whether it is the in-cluster
// config.
func restConfig(path string) (*rest.Config, bool, error) {
	cfg, err := clusterFlags{kubeconfig: path}.load()
	if err != nil {
		return nil, false, err
	}
	return cfg.rest, cfg.inCluster, nil
}

// install creates or updates the Sync CRD and its admission policy, the
// agent's namespace and the root Sync.
func install(ctx context.Context, c client.Client, o *agentOptions) error {
	defs, err := crd.All()
	if err != nil {
		return err
	}
	for _, def := range defs {
		if err := installCRD(ctx, c, def); err != nil {
			return err
		}
	}
	// The policy that refuses a Sync whose namespace and name do not fit
	// its objects' label. Without it (an API server before 1.30, or no
	// permission) such a Sync is still refused, as InvalidSpec, before it
	// writes anything.
	policies, err := crd.SyncPolicies()
	if err != nil {
		return err
	}
	for _, p := range policies {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(p), client.FieldOwner(apply.FieldManager), client.ForceOwnership); err != nil {
			ctrl.Log.Info("could not install the admission policy for Sync names; over-long names stall as InvalidSpec instead",
				"kind", p.GetKind(), "name", p.GetName(), "error", err.Error())
			break
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("create namespace %s: %w", o.namespace, err)
	}
	if o.gitURL == "" {
		return nil
	}
	root := rootSync(o)
	if err := applyTyped(ctx, c, root); err != nil {
		return fmt.Errorf("create the root Sync %s/%s: %w", root.Namespace, root.Name, err)
	}
	return nil
}

// installCRD applies def and waits until it is Established.
func installCRD(ctx context.Context, c client.Client, def *apiextensionsv1.CustomResourceDefinition) error {
	def.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	kind := def.Spec.Names.Kind
	if err := applyTyped(ctx, c, def); err != nil {
		return fmt.Errorf("install the %s CRD: %w", kind, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: def.Name}, &got); err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the %s CRD did not become Established: %w", kind, err)
	}
	return nil
}

func rootSync(o *agentOptions) *v1alpha1.Sync {
	s := &v1alpha1.Sync{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.SyncKind},
		ObjectMeta: metav1.ObjectMeta{Name: rootSyncName, Namespace: o.namespace},
		Spec: v1alpha1.SyncSpec{
			Source: v1alpha1.Source{Git: v1alpha1.GitSource{
				URL:                      o.gitURL,
				Branch:                   o.gitBranch,
				InsecureSkipHostKeyCheck: o.insecureHost,
			}},
			Interval:           metav1.Duration{Duration: o.syncInterval},
			ServiceAccountName: o.syncServiceAccount,
		},
	}
	for _, p := range o.gitPaths {
		if p = strings.TrimSpace(p); p != "" {
			s.Spec.Paths = append(s.Spec.Paths, p)
		}
	}
	s.Spec.Wait = o.syncWait
	if o.gitSecret != "" {
		s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: o.gitSecret}
	}
	return s
}

// applyTyped server-side applies a typed object as the agent's installer.
func applyTyped(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(u, "status")
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner("driftless-agent"), client.ForceOwnership)
}

// trustedProxies parses --webhook-trusted-proxies, which the flag check
// has already validated.
func trustedProxies(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// agentLog is where the agent logs. controller-runtime keeps the first
// logger a process sets (ctrl.SetLogger fulfils its loggers once), so the
// agent sets it once, writing here, and each run points agentLog at its
// own writer (the command's standard error) while it runs: a production
// process runs the agent once; a test binary runs it many times, each
// test keeping its agent's log. The format is the first run's.
var (
	agentLog       = &logSwitch{w: io.Discard}
	setAgentLogger sync.Once
)

// logSwitch writes to its current writer, one write at a time (the
// writer may be a plain buffer).
type logSwitch struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *logSwitch) set(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}

func (s *logSwitch) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
