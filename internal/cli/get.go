package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/syncview"
	"github.com/spf13/cobra"
)

// getOptions are the flags of `driftless get syncs`.
type getOptions struct {
	cluster       clusterFlags
	output        string
	namespace     string
	allNamespaces bool
	watch         bool
	// allContexts lists every context of the kubeconfig, each within
	// contextTimeout.
	allContexts    bool
	contextTimeout time.Duration
}

func newGetCommand() *cobra.Command {
	get := &cobra.Command{
		Use:   "get",
		Short: "List driftless objects: get syncs",
		Args:  cobra.NoArgs,
	}
	get.AddCommand(newGetSyncsCommand())
	return get
}

func newGetSyncsCommand() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:     "syncs",
		Aliases: []string{"sync"},
		Short:   "List Syncs: revision, Ready, last sync, objects and drift",
		Long: `List the Syncs of a namespace (-n, default: the kubeconfig context's), or of
every namespace (-A), one row each:

  NAMESPACE  with -A
  NAME       the Sync
  REVISION   short SHA of the last revision applied successfully
  READY      True, or False/Unknown with the reason, such as False (FetchFailed);
             Held (N pending) for a Sync held at a revision (driftless hold),
             N the commits of its branch that wait for driftless release
  LAST SYNC  how long ago the newest recorded sync started
  OBJECTS    objects in the Sync's inventory
  DRIFT      drift incidents in the last 24 hours (changes made in the
             cluster to managed objects; the Sync keeps the last 20)
  SUSPENDED  True when spec.suspend stops the Sync

--all-contexts lists every context of the kubeconfig at once (each in its
context's namespace, or -n, or -A), with a CONTEXT column first; a context
that does not answer within --context-timeout is shown as Unreachable (and
one whose API server answers with an error as Error) with the reason under
the table, and the others are listed all the same. It fails only when no
context could be listed.

--watch prints the table again whenever a Sync changes, until Ctrl-C.
-o json and -o yaml print {"syncs": [...]} with the fields namespace, name,
revision (full SHA), ready, reason, message, lastSyncAt, objects,
driftLast24h, driftIncidents (all kept), suspended and hold (status.hold:
revision, by, reason, since, tip, pending); with --watch, one
document per change. With --all-contexts each Sync also has context, and
"unreachableContexts" lists [{context, status, error}].`,
		Example: `  # every Sync of the cluster
  driftless get syncs -A

  # the Syncs of one namespace, printed again as they change
  driftless get syncs -n driftless-system --watch

  # every Sync of every cluster of the kubeconfig
  driftless get syncs -A --all-contexts

  # for scripts
  driftless get syncs -A -o json | jq -r '.syncs[] | select(.ready != "True") | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.watch {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			return runGetSyncs(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace to list (default: the kubeconfig context's namespace)")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the Syncs of every namespace")
	f.BoolVarP(&o.watch, "watch", "w", false, "print the table again whenever a Sync changes, until interrupted")
	f.BoolVar(&o.allContexts, "all-contexts", false, "list the Syncs of every context of the kubeconfig, with a CONTEXT column; unreachable contexts are shown as such")
	f.DurationVar(&o.contextTimeout, "context-timeout", defaultContextTimeout, "with --all-contexts, how long each context may take to answer before it is shown as Unreachable")
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// syncRow is one Sync as `get syncs` shows it.
type syncRow = syncview.Row

// syncList is the data of `get syncs`.
type syncList struct {
	Syncs []syncRow `json:"syncs"`
	// Unreachable lists the contexts --all-contexts could not list.
	Unreachable []contextError `json:"unreachableContexts,omitempty"`
	// allNamespaces adds the NAMESPACE column to the table, contexts the
	// CONTEXT column.
	allNamespaces bool
	contexts      bool
	now           time.Time
	colour        painter
}

func renderSyncTable(w io.Writer, l syncList) error {
	if len(l.Syncs) == 0 && len(l.Unreachable) == 0 {
		_, err := fmt.Fprintln(w, "No Syncs found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	var header []string
	if l.contexts {
		header = append(header, "CONTEXT")
	}
	if l.allNamespaces {
		header = append(header, "NAMESPACE")
	}
	// A painted column is painted in the header too, to keep it aligned.
	header = append(header, "NAME", "REVISION", l.colour.paint(colourNone, "READY"), "LAST SYNC", "OBJECTS", "DRIFT", l.colour.paint(colourNone, "SUSPENDED"))
	// The cluster is shown when a Sync applies to another (spec.kubeConfig).
	remote := slices.ContainsFunc(l.Syncs, func(r syncRow) bool { return r.Cluster != "" && r.Cluster != v1alpha1.InCluster })
	if remote {
		header = append(header, "CLUSTER")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range l.Syncs {
		var cells []string
		if l.contexts {
			cells = append(cells, r.Context)
		}
		if l.allNamespaces {
			cells = append(cells, r.Namespace)
		}
		last := time.Time{}
		if r.LastSyncAt != nil {
			last = r.LastSyncAt.Time
		}
		suspended := "False"
		if r.Suspended {
			suspended = l.colour.paint(colourYellow, "True")
		} else {
			suspended = l.colour.paint(colourNone, suspended)
		}
		cells = append(cells, r.Name, orDash(source.Short(r.Revision)),
			readyCell(r, l.colour),
			age(l.now, last), fmt.Sprint(r.Objects), fmt.Sprint(r.DriftLast24h), suspended)
		if remote {
			cells = append(cells, r.Cluster)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, u := range l.Unreachable {
		cells := []string{u.Context}
		if l.allNamespaces {
			cells = append(cells, "-")
		}
		cells = append(cells, "-", "-", l.colour.paint(colourRed, u.Status), "-", "-", "-", l.colour.paint(colourNone, "-"))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range l.Unreachable {
		if _, err := fmt.Fprintf(w, "%s: %s: %s\n", u.Context, strings.ToLower(u.Status), u.Error); err != nil {
			return err
		}
	}
	return nil
}

func runGetSyncs(ctx context.Context, o *getOptions, out io.Writer) error {
	if o.allNamespaces && o.namespace != "" {
		return fmt.Errorf("-n %s and -A: pass one of them", o.namespace)
	}
	v, err := newView(o.output, tableView[syncList](renderSyncTable))
	if err != nil {
		return err
	}
	if o.allContexts {
		return runGetSyncsAllContexts(ctx, o, v, out)
	}
	c, ns, host, err := o.cluster.syncClient()
	if err != nil {
		return err
	}
	if o.namespace != "" {
		ns = o.namespace
	}
	if o.allNamespaces {
		ns = ""
	}
	p := &syncPrinter{out: out, view: v, allNamespaces: o.allNamespaces, colour: painter(isTerminal(out))}
	p.separate = o.output == "yaml"
	if !o.watch {
		var list v1alpha1.SyncList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return listError(err, host)
		}
		return p.print(list.Items)
	}
	return watchSyncs(ctx, c, ns, host, p.print)
}

func listError(err error, host string) error {
	if meta.IsNoMatchError(err) {
		return &exitError{code: 2, err: fmt.Errorf("the cluster at %s serves no Sync API: is driftless installed? (%w)", host, err)}
	}
	return fmt.Errorf("list Syncs in the cluster at %s: %w", host, err)
}

// syncPrinter prints lists of Syncs, skipping a list that would print
// exactly what it printed last.
type syncPrinter struct {
	out           io.Writer
	view          view[syncList]
	allNamespaces bool
	colour        painter
	// separate puts "---" between YAML documents.
	separate bool
	last     string
	printed  int
}

func (p *syncPrinter) print(items []v1alpha1.Sync) error {
	now := time.Now()
	l := syncList{Syncs: make([]syncRow, 0, len(items)), allNamespaces: p.allNamespaces, now: now, colour: p.colour}
	for i := range items {
		l.Syncs = append(l.Syncs, syncview.NewRow(&items[i], now))
	}
	sort.Slice(l.Syncs, func(i, j int) bool {
		a, b := l.Syncs[i], l.Syncs[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	var b strings.Builder
	if err := p.view.Render(&b, l); err != nil {
		return err
	}
	if b.String() == p.last {
		return nil
	}
	p.last = b.String()
	if p.printed > 0 {
		sep := "\n"
		if p.separate {
			sep = "---\n"
		}
		if _, err := io.WriteString(p.out, sep); err != nil {
			return err
		}
	}
	p.printed++
	_, err := io.WriteString(p.out, b.String())
	return err
}

// watchSyncs calls show with the Syncs of namespace ns ("" for all),
// then again after every change, until ctx ends; then it returns nil. A
// watch the API server ends is started again from a new list.
func watchSyncs(ctx context.Context, c client.WithWatch, ns, host string, show func([]v1alpha1.Sync) error) error {
	syncs := map[client.ObjectKey]v1alpha1.Sync{}
	return relistWatch(ctx,
		func(ctx context.Context) (string, error) {
			var list v1alpha1.SyncList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return "", listError(err, host)
			}
			clear(syncs)
			for _, s := range list.Items {
				syncs[client.ObjectKeyFromObject(&s)] = s
			}
			return list.ResourceVersion, showSyncs(syncs, show)
		},
		func(ctx context.Context, rv string) (watch.Interface, error) {
			w, err := c.Watch(ctx, &v1alpha1.SyncList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				return nil, fmt.Errorf("watch Syncs in the cluster at %s: %w", host, err)
			}
			return w, nil
		},
		func(ctx context.Context, w watch.Interface) error { return followSyncs(ctx, w, syncs, show) })
}

// relistWatch lists, then watches from the resource version list returns
// and follows that watch, until ctx ends; then it returns nil. A watch
// the API server ends (after 30 to 60 minutes, or when the resource
// version is too old) is started again from a new list: follow returns
// nil when its watch ends, and an error to stop. An error of list or
// start stops too, unless ctx has ended.
func relistWatch(ctx context.Context, list func(context.Context) (string, error),
	start func(ctx context.Context, rv string) (watch.Interface, error), follow func(context.Context, watch.Interface) error) error {
	for ctx.Err() == nil {
		rv, err := list(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		w, err := start(ctx, rv)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err = follow(ctx, w)
		w.Stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// followSyncs applies the events of w to syncs and shows them after each,
// until ctx ends or w ends or fails.
func followSyncs(ctx context.Context, w watch.Interface, syncs map[client.ObjectKey]v1alpha1.Sync, show func([]v1alpha1.Sync) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil // list again
			}
			s, ok := ev.Object.(*v1alpha1.Sync)
			if !ok {
				continue
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				syncs[client.ObjectKeyFromObject(s)] = *s
			case watch.Deleted:
				delete(syncs, client.ObjectKeyFromObject(s))
			default:
				continue
			}
			if err := showSyncs(syncs, show); err != nil {
				return err
			}
		}
	}
}

func showSyncs(syncs map[client.ObjectKey]v1alpha1.Sync, show func([]v1alpha1.Sync) error) error {
	items := make([]v1alpha1.Sync, 0, len(syncs))
	for _, s := range syncs {
		items = append(items, s)
	}
	return show(items)
}

// readyCell is the READY cell of r: the Ready status (and the reason when
// it is not True), or for a held Sync "Held" and the commits pending.
func readyCell(r syncRow, colour painter) string {
	if r.Hold != nil && r.Ready == "True" && r.Reason == v1alpha1.ReasonHeld {
		return colour.paint(colourYellow, fmt.Sprintf("Held (%d pending)", r.Hold.Pending))
	}
	return colour.paint(readyColour(r.Ready), readyText(r.Ready, r.Reason))
}
