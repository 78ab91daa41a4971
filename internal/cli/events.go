package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/plan"
	"github.com/spf13/cobra"
)

// eventsReporter is the reporting controller of the events the agent
// writes: the name of its event recorder.
const eventsReporter = "driftless"

// eventsOptions are the flags of `driftless events`.
type eventsOptions struct {
	cluster       clusterFlags
	output        string
	namespace     string
	allNamespaces bool
	watch         bool
}

func newEventsCommand() *cobra.Command {
	o := &eventsOptions{}
	cmd := &cobra.Command{
		Use:   "events [NAMESPACE/NAME]",
		Short: "Show the Events of Syncs and of the objects they manage, newest last",
		Long: `Show Events (events.k8s.io/v1, which also holds core/v1 Events) newest last,
as kubectl does: how long ago each was last seen, its type, reason, the
object it regards, the action and the note.

Without an argument: the Events regarding any Sync of a namespace (-n,
default: the kubeconfig context's), or of every namespace (-A).

With NAMESPACE/NAME: the Events regarding that Sync (syncs, failures, drift
found and reverted, deletion), and the Events the agent wrote (reporting
controller "driftless") regarding the objects of its inventory: drift found
on or reverted in that object. Those are read from the namespaces of the
inventory's objects; Events on cluster-scoped objects are in namespace
"default". Events of other controllers on the objects (a Deployment's
scaling, a Pod's pulls) are left out: "kubectl events" shows them.

The API server keeps Events for one hour by default (--event-ttl), so this
shows the last hour at most.

--watch prints each new Event (or a repeated one, with its new count) as a
row once the Events so far are printed, until Ctrl-C; with -o json or -o
yaml, one document per Event. The objects of a Sync are those of its
inventory when the command starts.

-o json and -o yaml print {"sync" (when given), "events": [{"namespace",
"object", "type", "reason", "action", "note", "lastSeen", "count",
"reportingController"}]}, oldest first.`,
		Example: `  # what happened to one Sync and its objects
  driftless events driftless-system/default

  # the Events of every Sync
  driftless events -A`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg := ""
			if len(args) == 1 {
				arg = args[0]
			}
			ctx := cmd.Context()
			if o.watch {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			return runEvents(ctx, o, arg, cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = o.cluster.completeSyncs
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace whose Syncs' Events to show, without NAMESPACE/NAME (default: the kubeconfig context's namespace)")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "without NAMESPACE/NAME, show the Events of the Syncs of every namespace")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after the Events so far, print each new one as it comes, until interrupted")
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// eventRow is one Event; its JSON names are stable.
type eventRow struct {
	Namespace string `json:"namespace"`
	// Object is the object it regards: Kind/name.
	Object              string      `json:"object"`
	Type                string      `json:"type"`
	Reason              string      `json:"reason"`
	Action              string      `json:"action,omitempty"`
	Note                string      `json:"note,omitempty"`
	LastSeen            metav1.Time `json:"lastSeen"`
	Count               int32       `json:"count"`
	ReportingController string      `json:"reportingController,omitempty"`
}

// eventsReport is the data of `driftless events`.
type eventsReport struct {
	Sync          string     `json:"sync,omitempty"`
	Events        []eventRow `json:"events"`
	allNamespaces bool
	// watching prints the header of an empty table, for the rows to come.
	watching bool
	now      time.Time
	colour   painter
}

func renderEventsTable(w io.Writer, r eventsReport) error {
	if len(r.Events) == 0 && !r.watching {
		what := "the Syncs"
		if r.Sync != "" {
			what = "Sync " + r.Sync + " and its objects"
		}
		_, err := fmt.Fprintf(w, "No Events of %s (the API server keeps them for an hour by default).\n", what)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var header []string
	if r.allNamespaces {
		header = append(header, "NAMESPACE")
	}
	header = append(header, "LAST SEEN", r.colour.paint(colourNone, "TYPE"), "REASON", "OBJECT", "ACTION", "NOTE")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	writeEventRows(tw, r)
	return tw.Flush()
}

// renderEventRows writes the rows of r without a header, as --watch
// prints each new Event.
func renderEventRows(w io.Writer, r eventsReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeEventRows(tw, r)
	return tw.Flush()
}

func writeEventRows(tw io.Writer, r eventsReport) {
	for _, e := range r.Events {
		var cells []string
		if r.allNamespaces {
			cells = append(cells, e.Namespace)
		}
		last := age(r.now, e.LastSeen.Time)
		if e.Count > 1 {
			last += fmt.Sprintf(" (x%d)", e.Count)
		}
		colour := colourNone
		if e.Type == "Warning" {
			colour = colourYellow
		}
		cells = append(cells, last, r.colour.paint(colour, e.Type), e.Reason, e.Object, orDash(e.Action), e.Note)
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
}

func runEvents(ctx context.Context, o *eventsOptions, arg string, out io.Writer) error {
	if o.allNamespaces && o.namespace != "" {
		return fmt.Errorf("-n %s and -A: pass one of them", o.namespace)
	}
	if arg != "" && (o.allNamespaces || o.namespace != "") {
		return fmt.Errorf("NAMESPACE/NAME names the Sync and its namespace: leave out -n and -A")
	}
	v, err := newView(o.output, tableView[eventsReport](renderEventsTable))
	if err != nil {
		return err
	}
	c, ns, host, err := o.cluster.syncClient()
	if err != nil {
		return err
	}
	r := eventsReport{Events: []eventRow{}, now: time.Now(), colour: painter(isTerminal(out))}
	sel, err := selectEvents(ctx, c, o, arg, ns, host)
	if err != nil {
		return err
	}
	r.Sync, r.allNamespaces = sel.sync, sel.allNamespaces
	rvs := make([]string, len(sel.namespaces))
	seen := map[types.UID]string{}
	for i, n := range sel.namespaces {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(n)); err != nil {
			return eventsError(err, n, host)
		}
		rvs[i] = list.ResourceVersion
		for _, e := range list.Items {
			seen[e.UID] = e.ResourceVersion
			if sel.keep(n, e) {
				r.Events = append(r.Events, newEventRow(e))
			}
		}
	}
	sortEvents(r.Events)
	if !o.watch {
		return v.Render(out, r)
	}
	r.watching = true
	if err := v.Render(out, r); err != nil {
		return err
	}
	return watchEvents(ctx, c, sel, rvs, seen, host, func(row eventRow) error {
		r.Events, r.now = []eventRow{row}, time.Now()
		if o.output == "yaml" {
			if _, err := io.WriteString(out, "---\n"); err != nil {
				return err
			}
		}
		if o.output == "table" || o.output == "" {
			return renderEventRows(out, r)
		}
		return v.Render(out, r)
	})
}

// eventSelection says which Events `driftless events` shows: those of
// namespaces ("" for all) that keep accepts.
type eventSelection struct {
	sync          string
	namespaces    []string
	allNamespaces bool
	keep          func(ns string, e eventsv1.Event) bool
}

func selectEvents(ctx context.Context, c client.Reader, o *eventsOptions, arg, ns, host string) (eventSelection, error) {
	if arg == "" {
		if o.namespace != "" {
			ns = o.namespace
		}
		if o.allNamespaces {
			ns = ""
		}
		return eventSelection{namespaces: []string{ns}, allNamespaces: o.allNamespaces,
			keep: func(_ string, e eventsv1.Event) bool { return isSyncRef(e.Regarding) }}, nil
	}
	key, err := parseSyncArg(arg)
	if err != nil {
		return eventSelection{}, err
	}
	s, err := getSync(ctx, c, key, host)
	if err != nil {
		return eventSelection{}, err
	}
	// The managed objects, by the namespace of their Events.
	managed := map[string]map[plan.ID]bool{key.Namespace: {}}
	entries, _, err := inventory.Read(ctx, c, s) // an unreadable entry names no object to show
	if err != nil {
		return eventSelection{}, err
	}
	for _, e := range entries {
		id := e.ID
		evNS := id.Namespace
		if evNS == "" {
			evNS = metav1.NamespaceDefault
		}
		if managed[evNS] == nil {
			managed[evNS] = map[plan.ID]bool{}
		}
		managed[evNS][id] = true
	}
	sel := eventSelection{sync: key.String(), allNamespaces: len(managed) > 1}
	for n := range managed {
		sel.namespaces = append(sel.namespaces, n)
	}
	sort.Strings(sel.namespaces)
	sel.keep = func(n string, e eventsv1.Event) bool {
		ref := e.Regarding
		if isSyncRef(ref) {
			return ref.Namespace == key.Namespace && ref.Name == key.Name
		}
		return e.ReportingController == eventsReporter && managed[n][refID(ref)]
	}
	return sel, nil
}

// watchEvents calls show with each Event of sel added or changed after
// the resource versions rvs (one per namespace), until ctx ends; then it
// returns nil. A watch the API server ends is started again from a new
// list, of which it shows the Events not in seen (UID to resource
// version of the Events shown so far), as they were missed.
func watchEvents(ctx context.Context, c client.WithWatch, sel eventSelection, rvs []string, seen map[types.UID]string, host string, show func(eventRow) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type event struct {
		ns string
		e  eventsv1.Event
	}
	ch := make(chan event)
	g, gctx := errgroup.WithContext(ctx)
	for i, n := range sel.namespaces {
		from := rvs[i] // the list the caller showed
		send := func(e eventsv1.Event) bool {
			select {
			case ch <- event{ns: n, e: e}:
				return true
			case <-gctx.Done():
				return false
			}
		}
		g.Go(func() error {
			return relistWatch(gctx,
				func(ctx context.Context) (string, error) {
					if from != "" {
						rv := from
						from = ""
						return rv, nil
					}
					var list eventsv1.EventList
					if err := c.List(ctx, &list, client.InNamespace(n)); err != nil {
						return "", eventsError(err, n, host)
					}
					for _, e := range list.Items {
						if !send(e) {
							return "", ctx.Err()
						}
					}
					return list.ResourceVersion, nil
				},
				func(ctx context.Context, rv string) (watch.Interface, error) {
					w, err := c.Watch(ctx, &eventsv1.EventList{}, client.InNamespace(n),
						&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
					if err != nil {
						return nil, eventsError(err, n, host)
					}
					return w, nil
				},
				func(ctx context.Context, w watch.Interface) error {
					for {
						select {
						case <-ctx.Done():
							return nil
						case ev, ok := <-w.ResultChan():
							if !ok || ev.Type == watch.Error {
								return nil // list again
							}
							e, isEvent := ev.Object.(*eventsv1.Event)
							if !isEvent || (ev.Type != watch.Added && ev.Type != watch.Modified) {
								continue
							}
							if !send(*e) {
								return nil
							}
						}
					}
				})
		})
	}
	showErr := func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case s := <-ch:
				if rv, ok := seen[s.e.UID]; ok && rv == s.e.ResourceVersion {
					continue
				}
				seen[s.e.UID] = s.e.ResourceVersion
				if !sel.keep(s.ns, s.e) {
					continue
				}
				if err := show(newEventRow(s.e)); err != nil {
					return err
				}
			}
		}
	}()
	cancel()
	err := g.Wait()
	if showErr != nil {
		return showErr
	}
	return err
}

func eventsError(err error, ns, host string) error {
	where := "every namespace"
	if ns != "" {
		where = "namespace " + ns
	}
	return fmt.Errorf("list the Events of %s in the cluster at %s: %w", where, host, err)
}

func isSyncRef(ref corev1.ObjectReference) bool {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return ref.Kind == "Sync" && gv.Group == v1alpha1.GroupVersion.Group
}

// refID is the plan ID of the object an Event regards.
func refID(ref corev1.ObjectReference) plan.ID {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return plan.ID{Group: gv.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
}

func newEventRow(e eventsv1.Event) eventRow {
	row := eventRow{
		Namespace: e.Namespace, Object: e.Regarding.Kind + "/" + e.Regarding.Name,
		Type: e.Type, Reason: e.Reason, Action: e.Action, Note: e.Note,
		LastSeen: eventTime(e), Count: 1, ReportingController: e.ReportingController,
	}
	if e.Series != nil {
		row.Count = e.Series.Count
	} else if e.DeprecatedCount > 1 {
		row.Count = e.DeprecatedCount
	}
	return row
}

// eventTime is when the Event was last seen.
func eventTime(e eventsv1.Event) metav1.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return metav1.NewTime(e.Series.LastObservedTime.Time)
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp
	}
	return e.CreationTimestamp
}

// sortEvents puts the oldest first, as kubectl does.
func sortEvents(rows []eventRow) {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].LastSeen.Before(&rows[j].LastSeen) })
}
