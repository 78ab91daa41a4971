package ui

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/internal/syncview"
)

func row(cluster, ns, name, ready string, suspended bool) fleetRow {
	return fleetRow{Row: syncview.Row{Namespace: ns, Name: name, Ready: ready, Suspended: suspended}, Cluster: cluster}
}

func names(rows []fleetRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Cluster+"/"+r.Namespace+"/"+r.Name)
	}
	return out
}

func TestTheFleetShowsFailingSyncsFirstThenByClusterNamespaceAndName(t *testing.T) {
	rows := []fleetRow{
		row("b", "shop", "web", "True", false),
		row("a", "shop", "web", "True", false),
		row("b", "base", "crds", "False", false),
		row("a", "shop", "api", "Unknown", false),
		row("a", "infra", "dns", "False", true), // suspended: not failing
	}
	sortFleet(rows)
	want := []string{"a/shop/api", "b/base/crds", "a/infra/dns", "a/shop/web", "b/shop/web"}
	if diff := cmp.Diff(want, names(rows)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestTheFleetFilterKeepsTheClusterNamespaceAndStatusAsked(t *testing.T) {
	rows := []fleetRow{
		row("a", "shop", "web", "True", false),
		row("a", "shop", "api", "False", false),
		row("b", "shop", "web", "True", true),
		row("b", "infra", "dns", "True", false),
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"a/shop/web", "a/shop/api", "b/shop/web", "b/infra/dns"}},
		{"cluster=b", []string{"b/shop/web", "b/infra/dns"}},
		{"namespace=shop&status=ready", []string{"a/shop/web"}},
		{"status=failing", []string{"a/shop/api"}},
		{"status=suspended", []string{"b/shop/web"}},
	} {
		q, _ := url.ParseQuery(tc.query)
		f := filterOf(q)
		var got []fleetRow
		for _, r := range rows {
			if f.keeps(r) {
				got = append(got, r)
			}
		}
		if diff := cmp.Diff(tc.want, names(got)); diff != "" {
			t.Errorf("?%s (-want +got):\n%s", tc.query, diff)
		}
		if tc.query != "" && f.Query() == "" {
			t.Errorf("?%s: the filter's own query is empty, so the live stream would not keep it", tc.query)
		}
	}
}
