package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/health"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/origin"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/syncview"
	"github.com/spf13/cobra"
)

// explainDriftShown is how many of the object's drift incidents explain
// shows, newest first.
const explainDriftShown = 5

// explainOptions are the flags of `driftless explain`.
type explainOptions struct {
	cluster   clusterFlags
	output    string
	namespace string
}

func newExplainCommand() *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain KIND/NAME",
		Short: "Say which Sync manages an object, from which file, and who else changed it",
		Long: fmt.Sprintf(`Explain one object of the cluster: KIND is written as kubectl takes it
(deploy, Deployment, deployments.apps, configmap, cm, …), the namespace is -n
(default: the kubeconfig context's). It says

  - which Sync manages it (its driftless.dev/sync label), or that none does,
    and whether a Sync's inventory still lists it;
  - the file in git and the revision it came from (driftless.dev/origin);
  - when driftless last applied it, and which fields driftless owns and
    which other field managers (kubectl, controllers, …) own which fields,
    from its managedFields;
  - whether it is in the Sync's inventory, the Sync's last %d drift
    incidents on it, and, when the Sync is failing, its Ready reason and
    message; when the Sync is held (driftless hold), at which revision, by
    whom, why and how many commits wait.

An object that is not in the context's cluster but in the inventory of a
Sync that applies to another cluster (spec.kubeConfig) is read in that
cluster, with the kubeconfig of the Sync's Secret, which is read with your
rights (get on that Secret): when you may not, explain says so.

Exit status: 0 when the object was explained (managed or not), 2 when it
does not exist, its kind is unknown, or you may not read it.

-o json and -o yaml print the same, with the fields object, apiVersion,
cluster, sync, syncFound, origin, revision, lastApplied, inInventory, listedBy,
fieldManagers, drift, syncNotReady and held (the Sync's status.hold).`, explainDriftShown),
		Example: `  driftless explain deploy/web -n shop
  driftless explain configmap/web-config -n shop -o yaml
  driftless explain clusterrole/shop-reader`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace of the object (default: the kubeconfig context's namespace)")
	addOutputFlag(cmd, &o.output)
	o.cluster.add(cmd)
	return cmd
}

// fieldManager is one managedFields entry; its JSON names are stable.
type fieldManager struct {
	Manager     string       `json:"manager"`
	Operation   string       `json:"operation"`
	Subresource string       `json:"subresource,omitempty"`
	Time        *metav1.Time `json:"time,omitempty"`
	// Fields are the paths the manager owns, two levels deep, such as
	// "spec.replicas" or "metadata.labels".
	Fields []string `json:"fields"`
}

// explainDrift is one drift incident of the object.
type explainDrift struct {
	Time    metav1.Time `json:"time"`
	Action  string      `json:"action"`
	Fields  []string    `json:"fields,omitempty"`
	Message string      `json:"message,omitempty"`
}

// explainReport is the data of `driftless explain`; its JSON names are
// stable.
type explainReport struct {
	// Object is Kind/namespace/name, or Kind/name.
	Object     string `json:"object"`
	APIVersion string `json:"apiVersion"`
	// Cluster is the server of the cluster the object was read in when
	// that is not the current context's: the target of a Sync's
	// spec.kubeConfig whose inventory lists it.
	Cluster string `json:"cluster,omitempty"`
	// Sync is the NAMESPACE/NAME of the owning Sync, "" when none.
	Sync string `json:"sync,omitempty"`
	// SyncFound is false when the label names a Sync that does not exist.
	SyncFound bool `json:"syncFound"`
	// Origin is the file (and document) in git; Revision its short SHA.
	Origin   string `json:"origin,omitempty"`
	Revision string `json:"revision,omitempty"`
	// LastApplied is the time of driftless's managedFields entry.
	LastApplied *metav1.Time `json:"lastApplied,omitempty"`
	// InInventory says whether the owning Sync's inventory lists it.
	InInventory bool `json:"inInventory"`
	// ListedBy names the Syncs whose inventory lists the object.
	ListedBy      []string       `json:"listedBy,omitempty"`
	FieldManagers []fieldManager `json:"fieldManagers"`
	Drift         []explainDrift `json:"drift,omitempty"`
	// SyncNotReady is the owning Sync's Ready reason and message when it
	// is not Ready.
	SyncNotReady *syncCondition `json:"syncNotReady,omitempty"`
	// Health is the object's health by the owning Sync's health check
	// for its kind, when one names it: its message names the expression
	// that decided.
	Health *syncCondition `json:"health,omitempty"`
	// Held is the owning Sync's status.hold: the object is as the held
	// revision has it, whatever the branch says since.
	Held *v1alpha1.HoldStatus `json:"held,omitempty"`
	// listChecked is false when the Syncs could not be listed.
	listChecked bool
	now         time.Time
}

type syncCondition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

func renderExplainText(w io.Writer, r explainReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Object:\t%s (%s)\n", r.Object, r.APIVersion)
	if r.Cluster != "" {
		fmt.Fprintf(tw, "In cluster:\t%s (spec.kubeConfig of the Sync that lists it)\n", r.Cluster)
	}
	switch {
	case r.Sync == "":
		fmt.Fprintf(tw, "Managed by:\tno Sync (it has no %s label)\n", v1alpha1.SyncLabel)
	case !r.SyncFound:
		fmt.Fprintf(tw, "Managed by:\tSync %s, which does not exist (any more)\n", r.Sync)
	default:
		fmt.Fprintf(tw, "Managed by:\tSync %s\n", r.Sync)
	}
	if r.Origin != "" {
		fmt.Fprintf(tw, "From:\t%s at revision %s\n", r.Origin, orDash(r.Revision))
	}
	if r.LastApplied != nil {
		fmt.Fprintf(tw, "Last applied:\t%s ago (%s)\n", age(r.now, r.LastApplied.Time), r.LastApplied.UTC().Format(time.RFC3339))
	} else if r.Sync != "" {
		fmt.Fprintln(tw, "Last applied:\tnever by driftless (no managedFields entry of manager \"driftless\")")
	}
	switch {
	case r.Sync != "" && r.SyncFound && r.InInventory:
		fmt.Fprintf(tw, "Inventory:\tlisted by Sync %s\n", r.Sync)
	case r.Sync != "" && r.SyncFound:
		fmt.Fprintf(tw, "Inventory:\tnot in the inventory of Sync %s (it is pruned only once it is)\n", r.Sync)
	case len(r.ListedBy) > 0:
		fmt.Fprintf(tw, "Inventory:\tstill listed by Sync %s\n", strings.Join(r.ListedBy, ", "))
	case r.Sync == "" && r.listChecked:
		fmt.Fprintln(tw, "Inventory:\tin no Sync's inventory")
	case r.Sync == "":
		fmt.Fprintln(tw, "Inventory:\tunknown: you may not list Syncs")
	}
	if c := r.SyncNotReady; c != nil {
		fmt.Fprintf(tw, "Sync not Ready:\t%s: %s\n", readyText(c.Status, c.Reason), c.Message)
	}
	if h := r.Health; h != nil {
		fmt.Fprintf(tw, "Health:\t%s: %s\n", h.Status, h.Message)
	}
	if hs := r.Held; hs != nil {
		fmt.Fprintf(tw, "Held:\tthe Sync applies %s, not its branch's tip. %s\n", source.Short(hs.Revision), holdLine(hs, r.Sync))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(r.FieldManagers) == 0 {
		fmt.Fprintln(w, "\nField managers: none recorded (managedFields is empty)")
	} else {
		fmt.Fprintln(w, "\nField managers:")
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.FieldManagers) > 0 {
		fmt.Fprintln(tw, "  MANAGER\tOPERATION\tAGE\tFIELDS")
	}
	for _, m := range r.FieldManagers {
		op := m.Operation
		if m.Subresource != "" {
			op += " (" + m.Subresource + ")"
		}
		var t time.Time
		if m.Time != nil {
			t = m.Time.Time
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.Manager, op, age(r.now, t), strings.Join(m.Fields, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if r.Sync != "" && r.SyncFound {
		if len(r.Drift) == 0 {
			fmt.Fprintf(w, "\nDrift: none recorded by Sync %s\n", r.Sync)
			return nil
		}
		fmt.Fprintf(w, "\nDrift incidents of Sync %s on it (newest first, at most %d):\n", r.Sync, explainDriftShown)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  AGE\tACTION\tFIELDS\tMESSAGE")
		for _, d := range r.Drift {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", age(r.now, d.Time.Time), d.Action, orDash(strings.Join(d.Fields, ", ")), d.Message)
		}
		return tw.Flush()
	}
	return nil
}

func runExplain(ctx context.Context, o *explainOptions, arg string, out io.Writer) error {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
		return &exitError{code: 2, err: fmt.Errorf("%q: write the object as KIND/NAME, such as deploy/web or configmap/web-config", arg)}
	}
	v, err := newView(o.output, tableView[explainReport](renderExplainText))
	if err != nil {
		return err
	}
	cl, err := o.cluster.connect()
	if err != nil {
		return err
	}
	c, ns, host := cl.client, cl.namespace, cl.host
	if o.namespace != "" {
		ns = o.namespace
	}
	mapping, err := mappingFor(kind, cl.mapper)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("the cluster at %s has no kind %q: %w; `kubectl api-resources` lists them", host, kind, err)}
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	id := plan.ID{Group: mapping.GroupVersionKind.Group, Kind: mapping.GroupVersionKind.Kind, Namespace: ns, Name: name}
	cluster := ""
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		if cluster, err = readElsewhere(ctx, c, id, u, err); err != nil {
			if _, elsewhere := err.(*exitError); elsewhere {
				return err
			}
			return readObjectError(err, id, host)
		}
	}
	id = plan.IDOf(u)

	r := explainReport{Object: id.String(), APIVersion: u.GetAPIVersion(), Cluster: cluster, FieldManagers: []fieldManager{}, now: time.Now()}
	if s, ok := u.GetAnnotations()[v1alpha1.OriginAnnotation]; ok {
		if from, rev, err := origin.Parse(s); err == nil {
			r.Origin, r.Revision = from.String(), rev
		} else {
			r.Origin = s
		}
	}
	for _, e := range u.GetManagedFields() {
		m := fieldManager{Manager: e.Manager, Operation: string(e.Operation), Subresource: e.Subresource, Time: e.Time, Fields: syncview.FieldPaths(e.FieldsV1)}
		r.FieldManagers = append(r.FieldManagers, m)
		if e.Manager == apply.FieldManager && e.Subresource == "" && e.Time != nil {
			r.LastApplied = e.Time
		}
	}

	req, owned := drift.RequestFor(mapping.GroupVersionKind, u)
	if !owned {
		// No Sync claims it: does an inventory still list it?
		var list v1alpha1.SyncList
		if err := c.List(ctx, &list); err == nil {
			r.listChecked = true
			for _, s := range list.Items {
				if inInventory(ctx, c, &s, id) {
					r.ListedBy = append(r.ListedBy, s.Namespace+"/"+s.Name)
				}
			}
		}
		return v.Render(out, r)
	}
	r.Sync = req.Sync.String()
	var s v1alpha1.Sync
	switch err := c.Get(ctx, req.Sync, &s); {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return v.Render(out, r)
	case err != nil:
		return fmt.Errorf("read Sync %s, which manages %s: %w", req.Sync, id, err)
	}
	r.SyncFound = true
	r.InInventory = inInventory(ctx, c, &s, id)
	for _, d := range s.Status.Drift {
		if d.Object != id.String() || len(r.Drift) == explainDriftShown {
			continue
		}
		ed := explainDrift{Time: d.Time, Action: string(d.Action), Message: d.Message}
		for _, f := range d.Fields {
			ed.Fields = append(ed.Fields, f.Path)
		}
		r.Drift = append(r.Drift, ed)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		r.SyncNotReady = &syncCondition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
	}
	if checks, err := health.Compile(s.Spec.HealthChecks); err == nil {
		if h, ok := checks.Evaluate(ctx, u); ok {
			r.Health = &syncCondition{Status: string(h.Status), Message: h.Message}
		}
	}
	r.Held = s.Status.Hold
	return v.Render(out, r)
}

// readElsewhere reads the object id into u from the cluster of the Sync
// that applies it to another cluster (spec.kubeConfig), when it is not in
// the current one (notHere is that read's error) and such a Sync's
// inventory lists it; it returns that cluster's server. Otherwise it
// returns notHere, or why that cluster could not be read.
func readElsewhere(ctx context.Context, c client.Reader, id plan.ID, u *unstructured.Unstructured, notHere error) (string, error) {
	if !apierrors.IsNotFound(notHere) {
		return "", notHere
	}
	var list v1alpha1.SyncList
	if err := c.List(ctx, &list); err != nil {
		return "", notHere
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.KubeConfig == nil || !inInventory(ctx, c, s, id) {
			continue
		}
		tc, server, err := syncview.TargetReader(ctx, c, s)
		if err != nil {
			return "", &exitError{code: 2, err: fmt.Errorf("%s is not in this cluster; Sync %s/%s applies it to another cluster: %w", id, s.Namespace, s.Name, err)}
		}
		if err := tc.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, u); err != nil {
			return "", &exitError{code: 2, err: fmt.Errorf("%s is not in this cluster; Sync %s/%s applies it to cluster %s, where it could not be read: %w", id, s.Namespace, s.Name, server, err)}
		}
		return server, nil
	}
	return "", notHere
}

// mappingFor resolves KIND as kubectl does: a resource, a short name, a
// singular, or a kind, optionally with its group (deployments.apps) or
// version and group (deployments.v1.apps).
func mappingFor(arg string, mapper meta.RESTMapper) (*meta.RESTMapping, error) {
	gvr, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if gvr != nil {
		gvk, _ = mapper.KindFor(*gvr)
	}
	if gvk.Empty() {
		gvk, _ = mapper.KindFor(gr.WithVersion(""))
	}
	if !gvk.Empty() {
		return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	fullGVK, gk := schema.ParseKindArg(arg)
	if fullGVK != nil {
		if m, err := mapper.RESTMapping(fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return m, nil
		}
	}
	return mapper.RESTMapping(gk)
}

// readObjectError says why id could not be read, with exit code 2.
func readObjectError(err error, id plan.ID, host string) error {
	where := "cluster-scoped"
	if id.Namespace != "" {
		where = "in namespace " + id.Namespace
	}
	switch {
	case apierrors.IsNotFound(err):
		return &exitError{code: 2, err: fmt.Errorf("no %s named %s %s of the cluster at %s", id.Kind, id.Name, where, host)}
	case apierrors.IsForbidden(err):
		return &exitError{code: 2, err: fmt.Errorf("you may not read %s %s %s of the cluster at %s: ask for get on %s there, or use --context with an identity that has it",
			id.Kind, id.Name, where, host, id.GroupKind().String())}
	}
	return fmt.Errorf("read %s: %w", id, err)
}

// inInventory reports whether s's inventory lists id. Entries it cannot
// read, and an Inventory it may not read, list nothing.
func inInventory(ctx context.Context, c client.Reader, s *v1alpha1.Sync, id plan.ID) bool {
	entries, _, _ := inventory.Read(ctx, c, s)
	for _, e := range entries {
		if e.ID == id {
			return true
		}
	}
	return false
}
