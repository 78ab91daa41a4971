package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/driftless/driftless/internal/admission"
	"github.com/driftless/driftless/internal/agent"
)

func newAgentCommand() *cobra.Command { return agentCommand(runAgent) }

// runAgent runs the agent of o until ctx is done. It returns nil after a
// clean shutdown.
func runAgent(ctx context.Context, o agent.Options) error {
	a, err := agent.New(o)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// agentCommand is `driftless agent`, which runs the options of its flags
// with run.
func agentCommand(run func(context.Context, agent.Options) error) *cobra.Command {
	d := agent.DefaultOptions()
	o := &d
	var kubeconfig, shard string
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
SSH, or "username" and "password"/"token" for HTTPS.

With --shard the agent serves a share of the Syncs, chosen by their
driftless.dev/shard label (docs/sharding.md):

  (no --shard)       every Sync, whatever its label (one agent per cluster)
  --shard=shard-1    only the Syncs labelled driftless.dev/shard=shard-1
  --shard=''         only the Syncs without a driftless.dev/shard label

Run exactly one of these sets: either one agent without --shard, or one
agent with --shard='' plus one per shard name in use.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("shard") {
				o.Shard = &shard
			}
			opts, err := agentOptions(*o, kubeconfig, cmd.Flags().Changed("leader-elect"), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx, stop := withShutdownSignals(cmd.Context())
			defer stop()
			return run(ctx, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringVar(&o.Namespace, "namespace", "", "the agent's namespace, for the root Sync and leader election (default: the pod's namespace, else driftless-system; created if missing)")
	f.StringVar(&o.GitURL, "git-url", "", "repository of the root Sync (ssh://, https:// or file://); without it only user-created Syncs are served")
	f.StringVar(&o.GitBranch, "git-branch", d.GitBranch, "branch of the root Sync")
	f.StringSliceVar(&o.GitPaths, "git-path", nil, "comma-separated paths in the repository to apply (default: the whole repository)")
	f.StringVar(&o.GitSecret, "git-secret", "", "Secret in the agent's namespace with the root Sync's git credentials")
	f.BoolVar(&o.SyncWait, "sync-wait", false, "the root Sync is Ready only when every object it applied is healthy (rolled out and available)")
	f.DurationVar(&o.SyncInterval, "sync-interval", d.SyncInterval, "interval of the root Sync")
	f.StringVar(&o.SyncServiceAccount, "sync-service-account", "", "ServiceAccount in the agent's namespace the root Sync acts as (its spec.serviceAccountName); empty: the agent's own identity")
	f.BoolVar(&o.InsecureSkipHostKeyCheck, "git-insecure-skip-host-key-check", false, "accept any SSH host key for the root Sync (not recommended)")
	f.StringVar(&shard, "shard", "", "serve only the Syncs (and ImagePolicies) labelled driftless.dev/shard=`NAME`; --shard='' serves only those without that label; without --shard, every Sync, whatever its label (docs/sharding.md). Each shard elects its own leader (Lease driftless-agent-shard-NAME, driftless-agent-unlabelled for '', driftless-agent without --shard)")
	f.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader among agent replicas; on by default when running in a cluster (set --leader-elect=false to turn it off there), off elsewhere")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", d.LeaseDuration, "how long a standby waits, after the leader last renewed the Lease, before it takes over: a killed leader's Syncs and drift reverts stop for about this long")
	f.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", d.RenewDeadline, "how long the leader keeps trying to renew the Lease before it gives up leading (and exits); less than --leader-elect-lease-duration")
	f.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", d.RetryPeriod, "how often the leader renews the Lease and a standby tries to take it")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", d.MetricsAddr, "address of the Prometheus metrics endpoint; 0 disables it")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", d.ProbeAddr, "address of /healthz and /readyz; 0 disables them")
	f.StringVar(&o.LogFormat, "log-format", d.LogFormat, "log format: text or json")
	f.StringVar(&o.CacheDir, "cache-dir", d.CacheDir, "directory for git mirrors: one per repository and credentials, shared by the Syncs that read it, with a tree per revision")
	f.StringVar(&o.CacheMaxSize, "cache-max-size", d.CacheMaxSize, "bound on the git mirrors, extracted OCI artifacts and charts in --cache-dir (a quantity: 2Gi, 512Mi; 0 for none): past it, the least recently used mirror, artifact or chart not in use is removed after each fetch, and fetched again when needed")
	f.IntVar(&o.Concurrency, "concurrent", d.Concurrency, "Syncs reconciled at the same time, and drifted objects checked at the same time (each sync mostly waits for the API server and git, so more than the cores pays off for fleets of many Syncs)")
	f.IntVar(&o.ApplyConcurrency, "apply-concurrency", d.ApplyConcurrency, "requests one sync keeps in flight to the API server: its dry runs, writes and deletes (lower it to spare a small API server, whose priority and fairness may otherwise queue or refuse them)")
	f.Float32Var(&o.QPS, "kube-api-qps", d.QPS, "requests per second the agent's API clients may send, all together; 0 lets the agent choose: no client-side limit when the API server applies priority and fairness (it protects itself; every Kubernetes since 1.20 unless turned off), else 500; negative: no limit")
	f.IntVar(&o.Burst, "kube-api-burst", d.Burst, "burst of requests above --kube-api-qps; 0: twice --kube-api-qps (1000 when the agent chooses 500)")
	f.BoolVar(&o.DryRun, "dry-run", d.DryRun, "write nothing: report what every Sync would create, change, prune and revert (events, status, condition Drifted)")
	f.DurationVar(&o.FullResync, "full-resync-interval", d.FullResync, "how often a Sync compares every object even when git did not change and the drift watches saw nothing")
	addBudgetFlags(f, &o.RenderBudgets)
	f.StringVar(&o.DefaultServiceAccount, "default-service-account", "", "ServiceAccount (of the Sync's own namespace) a Sync outside the agent's namespace acts as when it names none in spec.serviceAccountName; empty refuses such Syncs (Stalled, ServiceAccountRequired) (docs/security.md)")
	f.BoolVar(&o.NoCrossNamespaceRefs, "no-cross-namespace-refs", d.NoCrossNamespaceRefs, "refuse (InvalidSpec) a Sync outside the agent's namespace whose spec.dependsOn names another namespace")
	f.BoolVar(&o.AllowFileURLs, "allow-file-urls", false, "let Syncs outside the agent's namespace use file:// sources, which read the agent's filesystem (tests, demos); without it only the agent's namespace may")
	f.StringSliceVar(&o.TenantSourceHosts, "tenant-source-hosts", nil, "comma-separated host patterns (github.com, *.corp.example) that Syncs outside the agent's namespace may fetch git repositories, charts (repository, registry and the download URLs of an index) and remote Kustomize bases from, and the key services their decryption keys name (Vault, Azure Key Vault, token URLs: docs/secrets.md); any other host is refused, naming it (docs/security.md); empty allows every host")
	f.StringVar(&o.WebhookAddr, "webhook-bind-address", "", "address of the webhook receiver (/hooks/github, /hooks/gitlab, /hooks/gitea, /hooks/bitbucket, /hooks/generic), such as :9292: a push wakes the Syncs that follow the pushed branch or tag at once (docs/webhooks.md); empty disables it")
	f.StringVar(&o.WebhookSecret, "webhook-secret", "", "Secret in the agent's namespace with the webhook secrets: one key per provider (github, gitlab, gitea, bitbucket, generic), or the key token for all; required with --webhook-bind-address")
	f.StringVar(&o.SopsAgeKeySecret, "sops-age-key-secret", "", "Secret, as namespace/name, whose *.agekey entries decrypt SOPS files for the Syncs in its namespace that set no spec.decryption.secretRef (the root Sync); empty means none (docs/secrets.md)")
	f.StringSliceVar(&o.WebhookTrustedProxies, "webhook-trusted-proxies", nil, "comma-separated CIDRs of the proxies in front of the webhook receiver (an Ingress): requests from them are rate-limited by their X-Forwarded-For sender; empty limits by the TCP peer")
	f.StringVar(&o.NotifyConfig, "notify-config", "", "YAML file of notification targets (Slack, Teams, generic webhook, GitHub/GitLab/Gitea commit statuses), the Syncs and events each receives, and the dedup settings (docs/notifications.md); empty sends none")
	f.StringVar(&o.ClusterName, "cluster-name", d.ClusterName, "name of this cluster in commit statuses (driftless/<cluster>/<namespace>/<name>, docs/notifications.md) and in the pages of --ui-bind-address")
	f.StringVar(&o.UIAddr, "ui-bind-address", "", "address of the web dashboard in its in-cluster mode, such as :9394 (docs/ui.md): each person signs in with their own bearer token, and every view and action is authorised for and made as them (TokenReview, SubjectAccessReview, impersonation); plain HTTP, put TLS in front (an Ingress); empty disables it")
	f.StringSliceVar(&o.UITrustedProxies, "ui-trusted-proxies", nil, "comma-separated CIDRs of the proxies in front of the dashboard (an Ingress): its sign-in limit counts the refused tokens of each client they forward (the rightmost X-Forwarded-For address that is not a trusted proxy); empty counts per TCP peer")
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

// agentOptions completes the options of the agent's flags: it checks
// them before connecting, finds the cluster of --kubeconfig by the rule
// every command follows (clusterFlags.load), and turns leader election on
// in a cluster unless --leader-elect was given.
func agentOptions(o agent.Options, kubeconfig string, leaderElectGiven bool, log io.Writer) (agent.Options, error) {
	o.Version = version
	o.LogTo = log
	if err := o.Check(); err != nil {
		return o, err
	}
	cfg, inCluster, err := restConfig(kubeconfig)
	if err != nil {
		return o, err
	}
	o.Config = cfg
	if !leaderElectGiven {
		o.LeaderElect = inCluster
	}
	return o, nil
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

func addAdmissionFlags(f *pflag.FlagSet, o *agent.Options) {
	d := admission.DefaultOptions()
	f.BoolVar(&o.Admission, "admission-warnings", false, "serve a validating admission webhook: kubectl edits and deletes of objects a Sync manages print where in git to change them and whether they will be reverted; objects annotated driftless.dev/protect=deny refuse such edits and deletes (docs/admission.md)")
	f.StringVar(&o.AdmissionAddr, "admission-bind-address", o.AdmissionAddr, "HTTPS address of the admission webhook")
	f.StringVar(&o.AdmissionURL, "admission-webhook-url", "", "URL the API server calls for the admission webhook, such as https://127.0.0.1:9443"+admission.Path+" for an agent outside the cluster; default: the Service "+d.Service+" in the agent's namespace")
	f.StringVar(&o.AdmissionBreakGlassGroup, "admission-break-glass-group", "", "group whose members may edit and delete objects annotated driftless.dev/protect=deny (with a warning); empty: nobody but the agent")
}
