package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/syncview"
)

// fleetRow is one Sync of one cluster on the fleet page.
type fleetRow struct {
	syncview.Row
	Cluster string
	// Short is the revision's short SHA; Subject and Author those of its
	// commit, from status.history.
	Short, Subject, Author string
	Age                    string
}

// Failing reports whether the row sorts first: not Ready and not
// suspended.
func (r fleetRow) Failing() bool { return r.Ready != "True" && !r.Suspended }

// Target is the cluster the Sync applies to when it is not the one it is
// in (spec.kubeConfig): its server, or its Secret before its first sync;
// "" for its own.
func (r fleetRow) Target() string {
	if r.Row.Cluster == v1alpha1.InCluster {
		return ""
	}
	return r.Row.Cluster
}

// URL is the row's Sync page.
func (r fleetRow) URL() string { return syncURL(r.Cluster, r.Namespace, r.Name) }

func syncURL(cluster, ns, name string) string {
	return "/c/" + url.PathEscape(cluster) + "/syncs/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}

// fleetFilter is the fleet page's query: a cluster, a namespace and a
// status (ready, failing, suspended), each empty for all.
type fleetFilter struct {
	Cluster, Namespace, Status string
}

func filterOf(q url.Values) fleetFilter {
	return fleetFilter{Cluster: q.Get("cluster"), Namespace: q.Get("namespace"), Status: q.Get("status")}
}

// Query is the filter as a query string, "" for none.
func (f fleetFilter) Query() string {
	q := url.Values{}
	for k, v := range map[string]string{"cluster": f.Cluster, "namespace": f.Namespace, "status": f.Status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func (f fleetFilter) keeps(r fleetRow) bool {
	if f.Cluster != "" && r.Cluster != f.Cluster || f.Namespace != "" && r.Namespace != f.Namespace {
		return false
	}
	switch f.Status {
	case "ready":
		return r.Ready == "True" && !r.Suspended
	case "failing":
		return r.Failing()
	case "suspended":
		return r.Suspended
	}
	return true
}

// newFleetRow is s of cluster as a row, its age and drift counted back
// from now.
func newFleetRow(cluster string, s *v1alpha1.Sync, now time.Time) fleetRow {
	r := fleetRow{Row: syncview.NewRow(s, now), Cluster: cluster, Short: source.Short(s.Status.LastAppliedRevision)}
	r.Context = cluster
	for _, h := range s.Status.History {
		if h.Revision == s.Status.LastAppliedRevision && h.Revision != "" {
			r.Subject, r.Author = h.Subject, h.Author
			break
		}
	}
	if r.LastSyncAt != nil {
		r.Age = ago(now, r.LastSyncAt.Time)
	}
	return r
}

// sortFleet puts failing Syncs first, then by cluster, namespace and name.
func sortFleet(rows []fleetRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Failing() != b.Failing() {
			return a.Failing()
		}
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// clusterProblem is a cluster whose Syncs could not be listed.
type clusterProblem struct {
	Cluster, Error string
}

// fleetData is what the fleet page shows.
type fleetData struct {
	Title    string
	Live     string
	Filter   fleetFilter
	Clusters []string
	// Namespaces are every namespace with a Sync, for the filter.
	Namespaces []string
	Rows       []fleetRow
	Total      int
	Problems   []clusterProblem
	Session    session
}

func (s *Server) fleet(ctx context.Context, f fleetFilter) fleetData {
	now := s.opts.Now()
	d := fleetData{Title: "Fleet", Filter: f, Live: "/live" + f.Query(), Session: sessionOf(ctx)}
	namespaces := map[string]bool{}
	for _, c := range s.clusters {
		d.Clusters = append(d.Clusters, c.name)
		items, err := c.syncs(ctx)
		if err == nil {
			items, err = c.visible(ctx, items)
		}
		if err != nil {
			d.Problems = append(d.Problems, clusterProblem{Cluster: c.name, Error: err.Error()})
			continue
		}
		for i := range items {
			r := newFleetRow(c.name, &items[i], now)
			namespaces[r.Namespace] = true
			d.Total++
			if f.keeps(r) {
				d.Rows = append(d.Rows, r)
			}
		}
	}
	for ns := range namespaces {
		d.Namespaces = append(d.Namespaces, ns)
	}
	sort.Strings(d.Namespaces)
	sortFleet(d.Rows)
	return d
}

func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, "fleet", http.StatusOK, s.fleet(r.Context(), filterOf(r.URL.Query())))
}

func (s *Server) fleetLive(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r.URL.Query())
	s.stream(w, r, s.stillAllowed(r, client.ObjectKey{}), func(ctx context.Context) (string, error) {
		return s.fragment("fleet", s.fleet(ctx, f))
	})
}

// ago is how long before now t was, as kubectl prints it ("12s",
// "5m3s", "2d"); "-" for no time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(max(now.Sub(t), 0))
}

// visible keeps the Syncs the viewer of ctx may list (in the in-cluster
// mode: SubjectAccessReviews for list, cluster-wide, else per
// namespace); an error says the viewer may list none.
func (c *clusterState) visible(ctx context.Context, items []v1alpha1.Sync) ([]v1alpha1.Sync, error) {
	v := viewerOf(ctx)
	if v == nil || c.auth == nil {
		return items, nil
	}
	all, reason, err := c.auth.authorize(ctx, v, "list", "", "")
	if err != nil || all {
		return items, err
	}
	allowed := map[string]bool{}
	var kept []v1alpha1.Sync
	for _, s := range items {
		ok, seen := allowed[s.Namespace]
		if !seen {
			if ok, _, err = c.auth.authorize(ctx, v, "list", s.Namespace, ""); err != nil {
				return nil, err
			}
			allowed[s.Namespace] = ok
		}
		if ok {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return nil, errors.New(reason)
	}
	return kept, nil
}
