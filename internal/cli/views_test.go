package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// On a terminal the READY and SUSPENDED cells are coloured; the columns
// after them must line up exactly as without colour.
func TestGetSyncsColouredTableLinesUpAsThePlainOne(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	last := metav1.NewTime(now.Add(-90 * time.Second))
	l := syncList{allNamespaces: true, now: now, Syncs: []syncRow{
		{Namespace: "driftless-system", Name: "default", Revision: shaWeb, Ready: "True", LastSyncAt: &last, Objects: 12},
		{Namespace: "shop", Name: "web", Revision: shaAPI, Ready: "False", Reason: "FetchFailed", Objects: 3, DriftLast24h: 2, Suspended: true},
		{Namespace: "shop", Name: "new", Ready: "Unknown"},
	}}
	var plain, coloured strings.Builder
	if err := renderSyncTable(&plain, l); err != nil {
		t.Fatal(err)
	}
	l.colour = true
	if err := renderSyncTable(&coloured, l); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(coloured.String(), colourRed+"False (FetchFailed)") {
		t.Errorf("a failing Sync's READY is not red:\n%q", coloured.String())
	}
	if got := ansi.ReplaceAllString(coloured.String(), ""); got != plain.String() {
		t.Errorf("coloured table without its colour codes:\n%s\nwant the plain table:\n%s", got, plain.String())
	}
	want := `NAMESPACE          NAME      REVISION   READY                 LAST SYNC   OBJECTS   DRIFT   SUSPENDED
driftless-system   default   8e1a1e8    True                  90s         12        0       False
shop               web       f9eb344    False (FetchFailed)   -           3         2       True
shop               new       -          Unknown               -           0         0       False
`
	if plain.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", plain.String(), want)
	}
}

func TestHistoryColouredTableLinesUpAsThePlainOne(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	h := historyReport{Sync: "shop/web", now: now, History: []historyRecord{
		{StartedAt: metav1.NewTime(now.Add(-time.Minute)), Revision: shaAPI, Subject: "api: break it", Author: "Jane Doe", Result: "Failed", Reason: "BuildFailed", Duration: "30ms", Message: "workloads/broken.yaml:1: invalid YAML"},
		{StartedAt: metav1.NewTime(now.Add(-time.Hour)), Revision: shaWeb, Subject: "web: first", Author: "Ann Li", Result: "Succeeded", Reason: "Succeeded", Duration: "1.2s", Created: 2, Message: "applied 8e1a1e8: 2 created, 0 configured, 0 unchanged, 0 pruned"},
	}}
	var plain, coloured strings.Builder
	if err := renderHistoryTable(&plain, h); err != nil {
		t.Fatal(err)
	}
	h.colour = true
	if err := renderHistoryTable(&coloured, h); err != nil {
		t.Fatal(err)
	}
	if got := ansi.ReplaceAllString(coloured.String(), ""); got != plain.String() {
		t.Errorf("coloured history without its colour codes:\n%s\nwant the plain table:\n%s", got, plain.String())
	}
	want := `AGE  STARTED               REVISION  SUBJECT        AUTHOR    RESULT                DURATION  CREATED  CONFIGURED  UNCHANGED  PRUNED  ADOPTED  MESSAGE
60s  2026-11-30T09:59:00Z  f9eb344   api: break it  Jane Doe  Failed (BuildFailed)  30ms      0        0           0          0       0        workloads/broken.yaml:1: invalid YAML
60m  2026-11-30T09:00:00Z  8e1a1e8   web: first     Ann Li    Succeeded             1.2s      2        0           0          0       0        applied 8e1a1e8: 2 created, 0 configured, 0 unchanged, 0 pruned
`
	if plain.String() != want {
		t.Errorf("history:\n%s\nwant:\n%s", plain.String(), want)
	}
}

func TestReconcileAndHistoryCompleteTheSyncsOfTheCluster(t *testing.T) {
	web, api := twoSyncs(t)
	r := runCLI(t, "__complete", "reconcile", "--kubeconfig", env.ControlPlane.KubeconfigPath(), web.Namespace).expect(t, 0)
	if !strings.Contains(r.out, web.String()+"\n") || strings.Contains(r.out, api.String()) {
		t.Errorf("completing %q offers:\n%s\nwant %s and not %s", web.Namespace, r.out, web, api)
	}
}
