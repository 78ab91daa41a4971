package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/sync/errgroup"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/health"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/origin"
	"github.com/driftless/driftless/internal/source"
	"github.com/spf13/cobra"
)

// healthMissing is the health of an inventory object that is not in the
// cluster.
const healthMissing = "Missing"

// treeOptions are the flags of `driftless tree`.
type treeOptions struct {
	cluster clusterFlags
	output  string
}

func newTreeCommand() *cobra.Command {
	o := &treeOptions{}
	cmd := &cobra.Command{
		Use:   "tree NAMESPACE/NAME",
		Short: "Show a Sync's objects with their health and the file each came from",
		Long: `Show a Sync and the objects of its inventory (the Inventory of the Sync's
name: what its last successful sync applied), grouped by namespace (cluster-scoped objects
first) and sorted by kind and name. Each object has its health, as the
agent's wait judges it (kstatus: Current, InProgress, Failed, Terminating,
Unknown), or Missing when it is no longer in the cluster, and the file in
git it came from (its driftless.dev/origin annotation). The Syncs it depends
on (spec.dependsOn) come first, with their Ready status.

-o json and -o yaml print {"sync", "ready", "reason", "revision",
"dependsOn": [{"sync", "ready", "reason", "found"}], "objects": [{"namespace",
"group", "kind", "name", "version", "health", "message", "origin"}]}.`,
		Example: `  driftless tree driftless-system/default

  # the objects that are not healthy
  driftless tree shop/web -o json | jq -r '.objects[] | select(.health != "Current") | "\(.kind)/\(.name) \(.health)"'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTree(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	cmd.ValidArgsFunction = o.cluster.completeSyncs
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// treeObject is one object of the inventory; its JSON names are stable.
type treeObject struct {
	Namespace string `json:"namespace,omitempty"`
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Health is kstatus's status (or that of the Sync's health check
	// for its kind, whose message names the expression), or Missing.
	Health  string `json:"health"`
	Message string `json:"message,omitempty"`
	// Origin is the file (and document) in git.
	Origin string `json:"origin,omitempty"`
}

// treeDependency is one Sync of spec.dependsOn.
type treeDependency struct {
	Sync   string `json:"sync"`
	Ready  string `json:"ready"`
	Reason string `json:"reason,omitempty"`
	Found  bool   `json:"found"`
}

// treeReport is the data of `driftless tree`.
type treeReport struct {
	Sync      string           `json:"sync"`
	Ready     string           `json:"ready"`
	Reason    string           `json:"reason,omitempty"`
	Revision  string           `json:"revision,omitempty"`
	DependsOn []treeDependency `json:"dependsOn,omitempty"`
	Objects   []treeObject     `json:"objects"`
	// Unreadable says, for each inventory entry that is not an object ID,
	// what it is and what form it lacks.
	Unreadable []string `json:"unreadable,omitempty"`
	colour     painter
}

func healthColour(h string) string {
	switch h {
	case string(status.CurrentStatus):
		return colourGreen
	case string(status.InProgressStatus), string(status.TerminatingStatus), string(status.UnknownStatus):
		return colourYellow
	}
	return colourRed
}

func renderTreeText(w io.Writer, r treeReport) error {
	fmt.Fprintf(w, "Sync %s (Ready: %s, revision %s, %d objects)\n", r.Sync,
		r.colour.paint(readyColour(r.Ready), readyText(r.Ready, r.Reason)), orDash(source.Short(r.Revision)), len(r.Objects))
	// The branches: the dependencies, then one per namespace.
	type group struct {
		title   string
		objects []treeObject
	}
	var groups []group
	for _, d := range r.DependsOn {
		ready := readyText(d.Ready, d.Reason)
		if !d.Found {
			ready = "not found"
		}
		groups = append(groups, group{title: fmt.Sprintf("depends on Sync %s (Ready: %s)", d.Sync, r.colour.paint(readyColour(d.Ready), ready))})
	}
	for _, o := range r.Objects {
		title := "cluster-scoped"
		if o.Namespace != "" {
			title = "namespace " + o.Namespace
		}
		if len(groups) == 0 || groups[len(groups)-1].title != title {
			groups = append(groups, group{title: title})
		}
		groups[len(groups)-1].objects = append(groups[len(groups)-1].objects, o)
	}
	for _, u := range r.Unreadable {
		groups = append(groups, group{title: "unreadable: " + u})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, g := range groups {
		branch, indent := "├─ ", "│  "
		if i == len(groups)-1 {
			branch, indent = "└─ ", "   "
		}
		fmt.Fprintf(tw, "%s%s\n", branch, g.title)
		for j, o := range g.objects {
			leaf := "├─ "
			if j == len(g.objects)-1 {
				leaf = "└─ "
			}
			kind := o.Kind
			if o.Group != "" {
				kind += "." + o.Group
			}
			fmt.Fprintf(tw, "%s%s%s/%s\t%s\t%s\t%s\n", indent, leaf, kind, o.Name,
				r.colour.paint(healthColour(o.Health), o.Health), orDash(o.Origin), o.Message)
		}
	}
	return tw.Flush()
}

func runTree(ctx context.Context, o *treeOptions, arg string, out io.Writer) error {
	v, err := newView(o.output, tableView[treeReport](renderTreeText))
	if err != nil {
		return err
	}
	c, s, _, err := o.cluster.namedSync(ctx, arg)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(s)
	r := treeReport{Sync: key.String(), Revision: s.Status.LastAppliedRevision, Objects: []treeObject{}, colour: painter(isTerminal(out))}
	r.Ready, r.Reason = readyOf(s)
	for _, d := range s.Spec.DependsOn {
		dk := client.ObjectKey{Namespace: d.Namespace, Name: d.Name}
		if dk.Namespace == "" {
			dk.Namespace = s.Namespace
		}
		dep := treeDependency{Sync: dk.String(), Ready: "Unknown"}
		var ds v1alpha1.Sync
		if err := c.Get(ctx, dk, &ds); err == nil {
			dep.Found = true
			dep.Ready, dep.Reason = readyOf(&ds)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read Sync %s, which %s depends on: %w", dk, key, err)
		}
		r.DependsOn = append(r.DependsOn, dep)
	}
	entries, unreadable, err := inventory.Read(ctx, c, s)
	if err != nil {
		return err
	}
	r.Unreadable = errorLines(unreadable)
	for _, e := range entries {
		id := e.ID
		r.Objects = append(r.Objects, treeObject{Namespace: id.Namespace, Group: id.Group, Kind: id.Kind, Name: id.Name, Version: e.Version})
	}
	// The Sync's own health checks decide the kinds they name, as in its
	// waits; a spec that does not compile (the Sync is InvalidSpec) has
	// none.
	checks, _ := health.Compile(s.Spec.HealthChecks)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range r.Objects {
		g.Go(func() error {
			liveHealth(gctx, c, checks, &r.Objects[i])
			return nil
		})
	}
	_ = g.Wait()
	sort.SliceStable(r.Objects, func(i, j int) bool {
		a, b := r.Objects[i], r.Objects[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Name < b.Name
	})
	return v.Render(out, r)
}

// liveHealth reads o from the cluster and sets its health (by checks for
// the kinds they name) and origin.
func liveHealth(ctx context.Context, c client.Reader, checks *health.Checks, o *treeObject) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind})
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		o.Health, o.Message = healthMissing, "not in the cluster"
		return
	case meta.IsNoMatchError(err):
		o.Health, o.Message = healthMissing, "the cluster no longer serves its kind"
		return
	case apierrors.IsForbidden(err):
		o.Health, o.Message = string(status.UnknownStatus), "you may not read it"
		return
	case err != nil:
		o.Health, o.Message = string(status.UnknownStatus), err.Error()
		return
	}
	st, msg := apply.HealthWith(ctx, checks, u)
	o.Health, o.Message = string(st), msg
	if a, ok := u.GetAnnotations()[v1alpha1.OriginAnnotation]; ok {
		if from, _, err := origin.Parse(a); err == nil {
			o.Origin = from.String()
		}
	}
}

// readyOf is the Ready status and reason of s; "Unknown" when it has none.
func readyOf(s *v1alpha1.Sync) (string, string) {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return "Unknown", ""
	}
	return string(c.Status), c.Reason
}

// errorLines are the messages of the errors err joins (under its one
// wrapping message, as inventory.FromStatus returns them); err's own
// message when it joins none; none for nil.
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			var lines []string
			for _, one := range j.Unwrap() {
				lines = append(lines, one.Error())
			}
			return lines
		}
	}
	return []string{err.Error()}
}
