package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/syncview"
)

// eventsShown is how many of a Sync's newest Events its page lists.
const eventsShown = 20

// syncHeader is what the top of a Sync's page and every section of it
// share.
type syncHeader struct {
	Title   string
	Live    string
	Cluster string
	Key     client.ObjectKey
	URL     string
	Session session
	Row     fleetRow
	// GitURL is the Sync's git repository, for links to its forge: empty
	// for an OCI Sync. SourceURL and Ref name the source as people read
	// it (v1alpha1.Source.Origin), git or OCI.
	GitURL    string
	SourceURL string
	Ref       string
	// RevisionURL is the forge's page of the applied commit, when known.
	RevisionURL string
	// KubeConfigSecret is the Secret of spec.kubeConfig, for a Sync that
	// applies to another cluster (Row.Target).
	KubeConfigSecret string
}

// objectRow is one object of the Sync's tree.
type objectRow struct {
	syncview.Object
	URL     string
	FileURL string
}

// namespaceGroup is the objects of one namespace ("" for cluster-scoped).
type namespaceGroup struct {
	Namespace string
	Objects   []objectRow
}

type dependencyRow struct {
	syncview.Dependency
	URL string
}

type driftRow struct {
	v1alpha1.DriftIncident
	ObjectURL string
	FileURL   string
}

type historyRow struct {
	v1alpha1.SyncRecord
	Short     string
	CommitURL string
}

type eventRow struct {
	Time                time.Time
	Type, Reason, Note  string
	Count               int32
	ReportingController string
}

// syncData is what a Sync's page shows.
type syncData struct {
	syncHeader
	Groups     []namespaceGroup
	DependsOn  []dependencyRow
	Unreadable []string
	TreeError  string
	// ClusterError is why the objects' cluster (spec.kubeConfig's) could
	// not be read.
	ClusterError string
	Drift        []driftRow
	History      []historyRow
	Events       []eventRow
	EventError   string
	Now          time.Time
}

// header reads the Sync of the request from its cluster's watch; it
// answers the request itself (404, or the cluster's error) and returns
// false when there is none.
func (s *Server) header(w http.ResponseWriter, r *http.Request) (*clusterState, *v1alpha1.Sync, syncHeader, bool) {
	c := s.cluster(r.PathValue("cluster"))
	if c == nil {
		http.Error(w, fmt.Sprintf("no context %q: the dashboard shows %s", r.PathValue("cluster"), s.clusterNames()), http.StatusNotFound)
		return nil, nil, syncHeader{}, false
	}
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	if !s.authorized(w, r, c, "get", key) {
		return nil, nil, syncHeader{}, false
	}
	sy, err := c.sync(r.Context(), key)
	if err != nil {
		http.Error(w, fmt.Sprintf("context %s: %v", c.name, err), http.StatusBadGateway)
		return nil, nil, syncHeader{}, false
	}
	if sy == nil {
		http.Error(w, fmt.Sprintf("context %s has no Sync %s (or you may not read it)", c.name, key), http.StatusNotFound)
		return nil, nil, syncHeader{}, false
	}
	h := s.headerOf(c, sy)
	h.Session = sessionOf(r.Context())
	return c, sy, h, true
}

// authorized reports whether the viewer of r (in the in-cluster mode) may
// verb the Sync key of c, as a SubjectAccessReview answers; when not, it
// answers r with the refusal (403). In local mode the API server alone
// decides, so it always is.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, c *clusterState, verb string, key client.ObjectKey) bool {
	v := viewerOf(r.Context())
	if v == nil || c.auth == nil {
		return true
	}
	ok, reason, err := c.auth.authorize(r.Context(), v, verb, key.Namespace, key.Name)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
		return false
	case !ok:
		s.render(w, "refused", http.StatusForbidden, refusedData{Title: "Forbidden", Session: sessionOf(r.Context()), Refused: reason})
		return false
	}
	return true
}

// refusedData is what the refusal page shows.
type refusedData struct {
	Title   string
	Live    string
	Session session
	Refused string
}

func (s *Server) headerOf(c *clusterState, sy *v1alpha1.Sync) syncHeader {
	key := client.ObjectKeyFromObject(sy)
	u := syncURL(c.name, key.Namespace, key.Name)
	h := syncHeader{Title: "Sync " + key.String() + " · " + c.name, Live: u + "/live", Cluster: c.name, Key: key, URL: u,
		Row: newFleetRow(c.name, sy, s.opts.Now()), GitURL: sy.Spec.Source.Git.URL}
	h.SourceURL, h.Ref = sy.Spec.Source.Origin()
	h.RevisionURL = commitLink(h.GitURL, sy.Status.LastAppliedRevision)
	if kc := sy.Spec.KubeConfig; kc != nil {
		h.KubeConfigSecret = key.Namespace + "/" + kc.SecretRef.Name
	}
	return h
}

func (s *Server) clusterNames() []string {
	names := make([]string, 0, len(s.clusters))
	for _, c := range s.clusters {
		names = append(names, c.name)
	}
	return names
}

// status fills the parts of d that follow the Sync's status and Events:
// the live region.
func (s *Server) status(ctx context.Context, c *clusterState, sy *v1alpha1.Sync, d *syncData) {
	d.Now = s.opts.Now()
	d.Drift, d.History, d.Events = nil, nil, nil
	for _, in := range sy.Status.Drift {
		row := driftRow{DriftIncident: in, FileURL: fileLink(d.GitURL, sy.Status.LastAppliedRevision, in.Origin, 0)}
		d.Drift = append(d.Drift, row)
	}
	for _, h := range sy.Status.History {
		d.History = append(d.History, historyRow{SyncRecord: h, Short: source.Short(h.Revision), CommitURL: commitLink(d.GitURL, h.Revision)})
	}
	var events eventsv1.EventList
	reader, err := c.eventReader(ctx)
	if err == nil {
		err = reader.List(ctx, &events, client.InNamespace(sy.Namespace))
	}
	if err != nil {
		d.EventError = fmt.Sprintf("list Events in namespace %s: %v", sy.Namespace, err)
		return
	}
	for _, e := range events.Items {
		ref := e.Regarding
		if ref.Kind != v1alpha1.SyncKind || ref.Name != sy.Name || ref.Namespace != sy.Namespace {
			continue
		}
		t := e.EventTime.Time
		if e.Series != nil {
			t = e.Series.LastObservedTime.Time
		} else if t.IsZero() {
			t = e.DeprecatedLastTimestamp.Time
		}
		row := eventRow{Time: t, Type: e.Type, Reason: e.Reason, Note: e.Note, ReportingController: e.ReportingController, Count: 1}
		if e.Series != nil {
			row.Count = e.Series.Count
		} else if e.DeprecatedCount > 0 {
			row.Count = e.DeprecatedCount
		}
		d.Events = append(d.Events, row)
	}
	sort.SliceStable(d.Events, func(i, j int) bool { return d.Events[i].Time.After(d.Events[j].Time) })
	if len(d.Events) > eventsShown {
		d.Events = d.Events[:eventsShown]
	}
}

func (s *Server) syncPage(w http.ResponseWriter, r *http.Request) {
	c, sy, h, ok := s.header(w, r)
	if !ok {
		return
	}
	d := syncData{syncHeader: h}
	cl, err := c.clientFor(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	tree, err := syncview.ReadTree(r.Context(), cl, sy)
	if err != nil {
		d.TreeError = err.Error()
	}
	d.Unreadable, d.ClusterError = tree.Unreadable, tree.ClusterError
	for _, dep := range tree.DependsOn {
		dk, _ := splitKey(dep.Sync)
		d.DependsOn = append(d.DependsOn, dependencyRow{Dependency: dep, URL: syncURL(c.name, dk.Namespace, dk.Name)})
	}
	for _, o := range tree.Objects {
		if len(d.Groups) == 0 || d.Groups[len(d.Groups)-1].Namespace != o.Namespace {
			d.Groups = append(d.Groups, namespaceGroup{Namespace: o.Namespace})
		}
		g := &d.Groups[len(d.Groups)-1]
		g.Objects = append(g.Objects, objectRow{Object: o, URL: objectURL(h.URL, o),
			FileURL: fileLink(h.GitURL, sy.Status.LastAppliedRevision, o.File, o.Line)})
	}
	s.status(r.Context(), c, sy, &d)
	for i := range d.Drift {
		d.Drift[i].ObjectURL = driftObjectURL(h.URL, d.Drift[i].Object, tree.Objects)
	}
	s.render(w, "sync", http.StatusOK, d)
}

func (s *Server) syncLive(w http.ResponseWriter, r *http.Request) {
	c, _, _, ok := s.header(w, r)
	if !ok {
		return
	}
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	s.stream(w, r, s.stillAllowed(r, key), func(ctx context.Context) (string, error) {
		sy, err := c.sync(ctx, key)
		if err != nil {
			return "", err
		}
		if sy == nil {
			return "<p role=\"alert\">This Sync no longer exists.</p>", nil
		}
		d := syncData{syncHeader: s.headerOf(c, sy)}
		s.status(ctx, c, sy, &d)
		return s.fragment("sync", d)
	})
}

// objectURL is the page of o under the Sync page syncPage.
func objectURL(syncPage string, o syncview.Object) string {
	q := url.Values{"group": {o.Group}, "version": {o.Version}, "kind": {o.Kind}, "namespace": {o.Namespace}, "name": {o.Name}}
	return syncPage + "/object?" + q.Encode()
}

// driftObjectURL is the object page of a drift incident's object
// (Kind/namespace/name), when the tree lists it.
func driftObjectURL(syncPage, id string, objects []syncview.Object) string {
	for _, o := range objects {
		if (plan.ID{Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}).String() == id {
			return objectURL(syncPage, o)
		}
	}
	return ""
}

func splitKey(s string) (client.ObjectKey, bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return client.ObjectKey{Namespace: s[:i], Name: s[i+1:]}, true
		}
	}
	return client.ObjectKey{Name: s}, false
}

// managerRow is one entry of an object's managedFields.
type managerRow struct {
	Manager, Operation, Subresource string
	Time                            string
	Fields                          []string
}

// objectData is what an object's page shows.
type objectData struct {
	syncHeader
	ID          string
	Kind        string
	Health      string
	HealthMsg   string
	Origin      string
	FileURL     string
	ReadError   string
	Managers    []managerRow
	Drift       []driftRow
	Changes     []Change
	PendingErr  string
	PendingDone bool
	// PendingRemote: the Sync applies to another cluster, which the
	// pending diff does not read.
	PendingRemote bool
}

func (s *Server) objectPage(w http.ResponseWriter, r *http.Request) {
	c, sy, h, ok := s.header(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	o := syncview.Object{Group: q.Get("group"), Version: q.Get("version"), Kind: q.Get("kind"), Namespace: q.Get("namespace"), Name: q.Get("name")}
	if o.Kind == "" || o.Version == "" || o.Name == "" {
		http.Error(w, "name the object with the query parameters kind, version and name (and group, namespace)", http.StatusBadRequest)
		return
	}
	id := plan.ID{Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
	d := objectData{syncHeader: h, ID: id.String(), Kind: o.Kind}
	d.Title = id.String() + " · " + h.Title
	cl, err := c.clientFor(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind})
	// A Sync of spec.kubeConfig has its objects in its target cluster,
	// read with the kubeconfig of its Secret, which cl reads as the
	// viewer.
	target, _, err := syncview.TargetReader(r.Context(), cl, sy)
	if err == nil {
		err = target.Get(r.Context(), client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, u)
	}
	if err != nil {
		d.ReadError = err.Error()
	} else {
		// Only metadata is read from u: never its data, so no Secret
		// value can reach the page.
		tree := syncview.ReadObject(r.Context(), target, sy, o)
		d.Health, d.HealthMsg, d.Origin = tree.Health, tree.Message, tree.Origin
		d.FileURL = fileLink(h.GitURL, sy.Status.LastAppliedRevision, tree.File, tree.Line)
		for _, m := range u.GetManagedFields() {
			row := managerRow{Manager: m.Manager, Operation: string(m.Operation), Subresource: m.Subresource, Fields: syncview.FieldPaths(m.FieldsV1)}
			if m.Time != nil {
				row.Time = m.Time.UTC().Format(time.RFC3339)
			}
			d.Managers = append(d.Managers, row)
		}
	}
	for _, in := range sy.Status.Drift {
		if in.Object == d.ID {
			d.Drift = append(d.Drift, driftRow{DriftIncident: in, FileURL: fileLink(h.GitURL, sy.Status.LastAppliedRevision, in.Origin, 0)})
		}
	}
	// The pending diff (diff --sync's engine) compares with the
	// context's cluster, which is not where a remote Sync's objects are.
	d.PendingRemote = sy.Spec.KubeConfig != nil
	if s.opts.Pending != nil && s.auth == nil && !d.PendingRemote {
		changes, err := s.opts.Pending(r.Context(), c.name, h.Key)
		d.PendingDone = err == nil
		if err != nil {
			d.PendingErr = err.Error()
		}
		for _, ch := range changes {
			if ch.ID == d.ID {
				d.Changes = append(d.Changes, ch)
			}
		}
	}
	s.render(w, "object", http.StatusOK, d)
}
