package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/syncview"
	"github.com/spf13/cobra"
)

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

The objects of a Sync that applies to another cluster (spec.kubeConfig) are
read in that cluster, with the kubeconfig of its Secret, which is read with
your rights (get on that Secret); when you may not, or the cluster does not
answer, their health is Unknown and the tree says why.

-o json and -o yaml print {"sync", "cluster", "clusterError", "ready", "reason", "revision",
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

// treeObject is one object of the inventory.
type treeObject = syncview.Object

// treeReport is the data of `driftless tree`.
type treeReport struct {
	syncview.Tree
	colour painter
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
	in := ""
	if r.Cluster != v1alpha1.InCluster {
		in = " in cluster " + r.Cluster
	}
	fmt.Fprintf(w, "Sync %s%s (Ready: %s, revision %s, %d objects)\n", r.Sync, in,
		r.colour.paint(readyColour(r.Ready), readyText(r.Ready, r.Reason)), orDash(source.Short(r.Revision)), len(r.Objects))
	if r.ClusterError != "" {
		fmt.Fprintf(w, "health unknown: %s\n", r.ClusterError)
	}
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
	tree, err := syncview.ReadTree(ctx, c, s)
	if err != nil {
		return err
	}
	return v.Render(out, treeReport{Tree: tree, colour: painter(isTerminal(out))})
}
