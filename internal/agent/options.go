package agent

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/admission"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/controller"
	"github.com/driftless/driftless/internal/forwarded"
	"github.com/driftless/driftless/internal/notify"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// Options are the settings of one agent: the value of every
// `driftless agent` flag, and the connection the CLI resolved from
// --kubeconfig. DefaultOptions holds the defaults; the CLI's flags take
// theirs from it.
type Options struct {
	// Config is the API server the agent talks to, as its own identity.
	// The agent copies it before setting QPS, Burst and UserAgent.
	Config *rest.Config
	// Version is the binary's version, in the agent's user agent and its
	// start-up log.
	Version string
	// Namespace is the agent's namespace, for the root Sync, leader
	// election, the webhook and notification state; empty: $POD_NAMESPACE,
	// else driftless-system. It is created if missing.
	Namespace string

	// GitURL, when set, makes the agent create the root Sync "default" in
	// Namespace from GitURL, GitBranch, GitPaths, GitSecret, SyncWait,
	// SyncInterval, SyncServiceAccount and InsecureSkipHostKeyCheck (the
	// Flux-v1-style flags).
	GitURL                   string
	GitBranch                string
	GitPaths                 []string
	GitSecret                string
	SyncWait                 bool
	SyncInterval             time.Duration
	SyncServiceAccount       string
	InsecureSkipHostKeyCheck bool

	// Shard, when set, makes the agent serve only the Syncs (and
	// ImagePolicies) labelled driftless.dev/shard with its value, or,
	// for "", those without that label; nil serves every Sync
	// (docs/sharding.md).
	Shard *string

	// LeaderElect elects a leader among replicas through a Lease in
	// Namespace (one per shard: controller.Shard.LeaseName), with these
	// timings (each shorter than the next:
	// RetryPeriod < RenewDeadline < LeaseDuration).
	LeaderElect   bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// MetricsAddr and ProbeAddr are the metrics and health endpoints'
	// addresses; "0" disables them.
	MetricsAddr string
	ProbeAddr   string
	// LogFormat is text or json; LogTo is where the log goes (nil:
	// standard error).
	LogFormat string
	LogTo     io.Writer

	// CacheDir holds the git mirrors; CacheMaxSize bounds them and the
	// charts (a quantity such as 2Gi; 0 for no bound).
	CacheDir     string
	CacheMaxSize string
	// Concurrency is how many Syncs, and drifted objects, are handled at
	// once.
	Concurrency int
	// ApplyConcurrency is how many requests one sync keeps in flight.
	ApplyConcurrency int
	// DryRun makes every Sync report instead of write.
	DryRun bool
	// FullResync is how often a Sync compares every object even when
	// nothing changed.
	FullResync time.Duration
	// QPS and Burst are the client-side rate limit of the agent's API
	// clients, all together: a positive QPS sets it (Burst 0: twice QPS),
	// a negative one turns it off, and 0 lets the agent choose (none when
	// the API server applies priority and fairness; see ClientLimit).
	QPS   float32
	Burst int
	// RenderBudgets bound each render.
	RenderBudgets render.Budgets

	// WebhookAddr, when set, serves the webhook receiver there, with the
	// secrets of the Secret WebhookSecret in Namespace; requests from
	// WebhookTrustedProxies (CIDRs) are limited by their X-Forwarded-For
	// sender.
	WebhookAddr           string
	WebhookSecret         string
	WebhookTrustedProxies []string
	// SopsAgeKeySecret, as namespace/name, holds the default SOPS age
	// keys of the Syncs in its namespace.
	SopsAgeKeySecret string
	// NotifyConfig is the notification targets' YAML file; empty sends
	// none. ClusterName names this cluster in commit statuses.
	NotifyConfig string
	ClusterName  string

	// Tenancy (docs/security.md): the ServiceAccount a Sync outside
	// Namespace acts as when it names none, whether such a Sync may name
	// another namespace in dependsOn (NoCrossNamespaceRefs refuses it) or
	// use file:// sources, and the hosts it may fetch from (empty: all).
	DefaultServiceAccount string
	NoCrossNamespaceRefs  bool
	AllowFileURLs         bool
	TenantSourceHosts     []string

	// UIAddr, when set, serves the web dashboard there, in its in-cluster
	// mode (docs/ui.md): each request carries its viewer's bearer token,
	// reviewed (TokenReview) and authorised (SubjectAccessReview) for
	// that user, and acts as that user (impersonation). Empty: off.
	UIAddr string
	// UITrustedProxies (CIDRs) are the proxies in front of the dashboard
	// (an Ingress): its sign-in limit counts the refused tokens of each
	// client they forward (X-Forwarded-For), not of the proxy.
	UITrustedProxies []string

	// Admission serves the validating admission webhook at AdmissionAddr,
	// registered with AdmissionURL (empty: the Service in Namespace);
	// members of AdmissionBreakGlassGroup may edit protected objects.
	Admission                bool
	AdmissionAddr            string
	AdmissionURL             string
	AdmissionBreakGlassGroup string
}

// DefaultOptions returns the agent's defaults: the one place they live.
func DefaultOptions() Options {
	c := controller.DefaultOptions()
	return Options{
		Version:              "dev",
		GitBranch:            "master",
		SyncInterval:         5 * time.Minute,
		LeaseDuration:        15 * time.Second,
		RenewDeadline:        10 * time.Second,
		RetryPeriod:          2 * time.Second,
		MetricsAddr:          ":8080",
		ProbeAddr:            ":8081",
		LogFormat:            "text",
		CacheDir:             c.CacheDir,
		CacheMaxSize:         resource.NewQuantity(c.CacheMaxSize, resource.BinarySI).String(),
		Concurrency:          c.Concurrency,
		ApplyConcurrency:     c.ApplyConcurrency,
		FullResync:           c.FullResync,
		RenderBudgets:        c.RenderBudgets,
		NoCrossNamespaceRefs: true,
		ClusterName:          notify.DefaultCluster,
		AdmissionAddr:        admission.DefaultOptions().Addr,
	}
}

// checked is what Check makes of the options that need parsing.
type checked struct {
	cacheMaxSize   int64
	sourceHosts    source.Hosts
	ageKey         client.ObjectKey
	notifications  notify.Config
	trustedProxies []netip.Prefix
	// uiTrustedProxies are the dashboard's (--ui-trusted-proxies).
	uiTrustedProxies []netip.Prefix
	shard            *controller.Shard
}

// Check reports the first option that is not valid, saying what to
// write instead, without connecting to anything. It names options by
// their flags.
func (o Options) Check() error {
	_, err := o.check()
	return err
}

func (o Options) check() (checked, error) {
	var r checked
	switch o.LogFormat {
	case "json", "text":
	default:
		return r, fmt.Errorf("unknown --log-format %q: use text or json", o.LogFormat)
	}
	var err error
	if r.trustedProxies, err = forwarded.ParsePrefixes("--webhook-trusted-proxies", o.WebhookTrustedProxies); err != nil {
		return r, err
	}
	if r.uiTrustedProxies, err = forwarded.ParsePrefixes("--ui-trusted-proxies", o.UITrustedProxies); err != nil {
		return r, err
	}
	if o.Shard != nil {
		if err := controller.CheckShardName(*o.Shard); err != nil {
			return r, fmt.Errorf("--shard: %w", err)
		}
		r.shard = &controller.Shard{Name: *o.Shard}
	}
	if o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline || o.RenewDeadline >= o.LeaseDuration {
		return r, fmt.Errorf("leader election: --leader-elect-retry-period %s, --leader-elect-renew-deadline %s, --leader-elect-lease-duration %s: each must be shorter than the next",
			o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)
	}
	if o.Burst < 0 {
		return r, fmt.Errorf("--kube-api-burst %d: write 0 (twice --kube-api-qps) or more", o.Burst)
	}
	if o.ApplyConcurrency < 1 {
		return r, fmt.Errorf("--apply-concurrency %d: a sync needs at least one request in flight (default %d)", o.ApplyConcurrency, apply.DefaultConcurrency)
	}
	cacheMaxSize, err := resource.ParseQuantity(o.CacheMaxSize)
	if err != nil || cacheMaxSize.Sign() < 0 {
		return r, fmt.Errorf("--cache-max-size %q: write a size such as 2Gi or 512Mi (0 for no bound)", o.CacheMaxSize)
	}
	r.cacheMaxSize = cacheMaxSize.Value()
	if r.sourceHosts, err = source.ParseHosts(o.TenantSourceHosts); err != nil {
		return r, fmt.Errorf("--tenant-source-hosts: %w", err)
	}
	if o.WebhookAddr != "" && o.WebhookSecret == "" {
		return r, fmt.Errorf("--webhook-bind-address needs --webhook-secret: name the Secret in the agent's namespace that holds the webhook secrets (docs/webhooks.md)")
	}
	if o.SopsAgeKeySecret != "" {
		ns, name, ok := strings.Cut(o.SopsAgeKeySecret, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return r, fmt.Errorf("--sops-age-key-secret %q: write namespace/name, such as driftless-system/sops-age", o.SopsAgeKeySecret)
		}
		r.ageKey = client.ObjectKey{Namespace: ns, Name: name}
	}
	if o.NotifyConfig != "" {
		loaded, err := notify.LoadConfig(o.NotifyConfig)
		if err != nil {
			return r, err
		}
		r.notifications = loaded
	}
	if strings.TrimSpace(o.ClusterName) == "" || strings.ContainsAny(o.ClusterName, " /") {
		return r, fmt.Errorf("--cluster-name %q: give a name without spaces or slashes, such as prod-eu", o.ClusterName)
	}
	r.notifications.Cluster = o.ClusterName
	return r, nil
}
