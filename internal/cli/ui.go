package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/ui"
	"github.com/spf13/cobra"
)

// uiOptions are the flags of `driftless ui`.
type uiOptions struct {
	kubeconfig     string
	contexts       []string
	allContexts    bool
	address        string
	open           bool
	contextTimeout time.Duration
}

func newUICommand() *cobra.Command {
	o := &uiOptions{}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard on this machine: every Sync of your clusters, live",
		Long: `Serve driftless's web dashboard on a loopback address of this machine, for
the person running it: every Sync of the kubeconfig's contexts with its Ready
status, revision (commit subject and author), drift of the last 24 hours and
suspension, failing first; a page per Sync with its objects by namespace
(health, file in git linked to the forge), drift incidents, history, Events
and dependencies; a page per object with what the next sync would change in
it (Secret values masked) and its field owners. Pages follow the cluster
live (Server-Sent Events fed by one watch on Syncs per context).

Three actions, each confirmed: sync now, suspend, resume. Every read and
every action is made with your own kubeconfig identity in that cluster, so
your RBAC applies: the dashboard grants nothing, and shows the API server's
refusal when it says no.

Contexts: the kubeconfig's current context, or each --context, or every
context with --all-contexts. A context that does not answer within
--context-timeout is shown as such; the others are shown all the same.

It serves loopback addresses only (127.0.0.1, ::1, localhost), answers only
requests addressed to them, and only whoever has the address it prints: each
run makes a random token, in that address (http://127.0.0.1:9393/?token=...);
opening it sets a session cookie and drops the token from the address bar.`,
		Example: `  # the current context, in the browser
  driftless ui --open

  # two clusters
  driftless ui --context prod-eu --context prod-us

  # every context of the kubeconfig, on another port
  driftless ui --all-contexts --address 127.0.0.1:9400`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runUI(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	f.StringArrayVar(&o.contexts, "context", nil, "kubeconfig context to show; repeat for several (default: the kubeconfig's current context)")
	f.BoolVar(&o.allContexts, "all-contexts", false, "show every context of the kubeconfig")
	f.StringVar(&o.address, "address", "127.0.0.1:9393", "loopback address and port to serve on (127.0.0.1, ::1 or localhost); port 0 picks a free one")
	f.BoolVar(&o.open, "open", false, "open the dashboard in the default browser")
	f.DurationVar(&o.contextTimeout, "context-timeout", defaultContextTimeout, "how long each context may take to answer its first list before it is shown as unreachable")
	return cmd
}

// uiClusters loads the contexts the flags name.
func uiClusters(o *uiOptions) ([]ui.Cluster, error) {
	if o.allContexts && len(o.contexts) > 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("--all-contexts and --context %s: pass one of them", o.contexts[0])}
	}
	names := o.contexts
	if o.allContexts {
		var err error
		if names, err = contextNames(o.kubeconfig); err != nil {
			return nil, err
		}
	}
	if len(names) == 0 {
		names = []string{""} // the current context
	}
	var clusters []ui.Cluster
	for _, name := range names {
		cfg, err := clusterFlags{kubeconfig: o.kubeconfig, context: name}.load()
		if err != nil {
			return nil, fmt.Errorf("context %q: %w", name, err)
		}
		if name == "" {
			name = currentContext(o.kubeconfig)
		}
		clusters = append(clusters, ui.Cluster{Name: name, Config: cfg.rest, Namespace: cfg.namespace})
	}
	return clusters, nil
}

// currentContext is the name of the kubeconfig's current context, or
// "in-cluster" when there is none.
func currentContext(kubeconfig string) string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	if raw, err := rules.Load(); err == nil && raw.CurrentContext != "" {
		return raw.CurrentContext
	}
	return "in-cluster"
}

// uiPending is the dashboard's "what the next sync would change": the
// engine of `driftless diff --sync`, as the viewer of each context.
func uiPending(o *uiOptions, clusters []ui.Cluster) ui.PendingFunc {
	contextOf := map[string]string{}
	for _, c := range clusters {
		contextOf[c.Name] = c.Name
	}
	if len(o.contexts) == 0 && !o.allContexts && len(clusters) == 1 {
		contextOf[clusters[0].Name] = "" // the current context, whatever its name
	}
	return func(ctx context.Context, cluster string, key client.ObjectKey) ([]ui.Change, error) {
		name, ok := contextOf[cluster]
		if !ok {
			return nil, fmt.Errorf("no context %q", cluster)
		}
		d := &diffOptions{sync: key.String(), cluster: clusterFlags{kubeconfig: o.kubeconfig, context: name}, budgets: render.DefaultBudgets()}
		r, err := clusterDiff(ctx, d, io.Discard)
		if err != nil {
			return nil, err
		}
		changes := make([]ui.Change, 0, len(r.Changes))
		for _, c := range r.Changes {
			changes = append(changes, ui.Change{ID: c.ID, Action: string(c.Action), Origin: c.Origin, Diff: c.Diff})
		}
		return changes, nil
	}
}

func runUI(ctx context.Context, o *uiOptions, out io.Writer) error {
	if !ui.IsLoopback(o.address) {
		return &exitError{code: 2, err: fmt.Errorf("--address %s is not a loopback address: the dashboard acts as you with your kubeconfig, so it serves only 127.0.0.1, ::1 or localhost (any port)", o.address)}
	}
	clusters, err := uiClusters(o)
	if err != nil {
		return err
	}
	token, err := ui.NewLocalToken()
	if err != nil {
		return err
	}
	srv, err := ui.New(ui.Options{Clusters: clusters, Pending: uiPending(o, clusters), ConnectTimeout: o.contextTimeout, LocalToken: token})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.address)
	if err != nil {
		return fmt.Errorf("serve the dashboard on %s: %w; pass another --address", o.address, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	url := "http://" + ln.Addr().String() + "/?token=" + token
	names := make([]string, 0, len(clusters))
	for _, c := range clusters {
		names = append(names, c.Name)
	}
	fmt.Fprintf(out, "driftless ui: %s (contexts: %v); Ctrl-C stops it\n", url, names)
	if o.open {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(out, "could not open a browser (%v): open %s yourself\n", err, url)
		}
	}
	return srv.Serve(ctx, ln, ui.LoopbackHosts(port))
}

// openBrowser opens url in the desktop's default browser.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
