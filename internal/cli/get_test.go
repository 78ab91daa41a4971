package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// cliResult is what one run of the driftless command printed.
type cliResult struct {
	code        int
	out, errOut string
}

// runCLI runs `driftless args...` in the test's process.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(args, &out, &errOut)
	return cliResult{code: code, out: out.String(), errOut: errOut.String()}
}

func (r cliResult) expect(t *testing.T, code int) cliResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.errOut)
	}
	return r
}

// tableRows reads an aligned table into one map per row, keyed by the
// column headers; a cell ends where the next column's header starts.
func tableRows(t *testing.T, table string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	header := lines[0]
	var names []string
	var starts []int
	for i := 0; i < len(header); {
		for i < len(header) && header[i] == ' ' {
			i++
		}
		start := i
		// Headers hold single spaces ("LAST SYNC"); columns are apart by two or more.
		for i < len(header) && !(header[i] == ' ' && (i+1 >= len(header) || header[i+1] == ' ')) {
			i++
		}
		if start < len(header) {
			names = append(names, header[start:i])
			starts = append(starts, start)
		}
	}
	var rows []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for k, name := range names {
			end := len(line)
			if k+1 < len(starts) && starts[k+1] < end {
				end = starts[k+1]
			}
			if starts[k] < len(line) {
				row[name] = strings.TrimSpace(line[starts[k]:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func rowNamed(rows []map[string]string, ns, name string) map[string]string {
	for _, r := range rows {
		if r["NAME"] == name && (ns == "" || r["NAMESPACE"] == ns) {
			return r
		}
	}
	return nil
}

// createSyncWithStatus creates a Sync that no agent serves and gives it
// status, as an agent would have written it.
func createSyncWithStatus(t *testing.T, ns, name string, suspend bool, status v1alpha1.SyncStatus) client.ObjectKey {
	t.Helper()
	cl := diffClusterClient(t)
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:   v1alpha1.Source{Git: v1alpha1.GitSource{URL: "ssh://git@example.com/fleet.git", Branch: "main"}},
			Interval: metav1.Duration{Duration: time.Hour},
			Suspend:  suspend,
		},
	}
	if err := cl.Create(context.Background(), s); err != nil {
		t.Fatalf("create Sync: %v", err)
	}
	s.Status = status
	if err := cl.Status().Update(context.Background(), s); err != nil {
		t.Fatalf("write the status of Sync %s/%s: %v", ns, name, err)
	}
	return client.ObjectKeyFromObject(s)
}

const (
	shaWeb = "8e1a1e868d59786d306e2d6ef3e8c3049fe0ac53"
	shaAPI = "f9eb344bb2cb8728eb7291f242c328460275ddc6"
)

// twoSyncs creates a healthy Sync web in one namespace and a failing,
// suspended Sync api in another.
func twoSyncs(t *testing.T) (web, api client.ObjectKey) {
	t.Helper()
	now := time.Now()
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	web = createSyncWithStatus(t, env.Namespace(t), "web", false, v1alpha1.SyncStatus{
		LastAppliedRevision: shaWeb,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded,
			Message: "applied 8e1a1e8: 0 created, 0 configured, 3 unchanged, 0 pruned", LastTransitionTime: ago(time.Hour)}},
		Inventory: []v1alpha1.InventoryEntry{{ID: "/ConfigMap/a/one", Version: "v1"}, {ID: "/ConfigMap/a/two", Version: "v1"}, {ID: "apps/Deployment/a/web", Version: "v1"}},
		History: []v1alpha1.SyncRecord{{Revision: shaWeb, StartedAt: ago(5 * time.Hour), Duration: "1.2s", Result: v1alpha1.ResultSucceeded,
			Reason: v1alpha1.ReasonSucceeded, Unchanged: 3}},
		Drift: []v1alpha1.DriftIncident{
			{Time: ago(time.Hour), Object: "ConfigMap/a/one", Action: v1alpha1.DriftReverted},
			{Time: ago(48 * time.Hour), Object: "ConfigMap/a/two", Action: v1alpha1.DriftReverted},
		},
	})
	api = createSyncWithStatus(t, env.Namespace(t), "api", true, v1alpha1.SyncStatus{
		LastAppliedRevision: shaAPI,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonFetchFailed,
			Message: "fetch ssh://git@example.com/fleet.git: connection refused", LastTransitionTime: ago(time.Hour)}},
	})
	return web, api
}

func TestGetSyncsListsEveryNamespaceWithAAndOneWithN(t *testing.T) {
	web, api := twoSyncs(t)
	kubeconfig := env.ControlPlane.KubeconfigPath()

	all := runCLI(t, "get", "syncs", "-A", "--kubeconfig", kubeconfig, "--context", "driftless-local").expect(t, 0)
	rows := tableRows(t, all.out)
	gotWeb, gotAPI := rowNamed(rows, web.Namespace, "web"), rowNamed(rows, api.Namespace, "api")
	wantWeb := map[string]string{"NAMESPACE": web.Namespace, "NAME": "web", "REVISION": "8e1a1e8", "READY": "True",
		"LAST SYNC": "5h", "OBJECTS": "3", "DRIFT": "1", "SUSPENDED": "False"}
	if diff := cmp.Diff(wantWeb, gotWeb); diff != "" {
		t.Errorf("get syncs -A, row of web (-want +got):\n%s\n%s", diff, all.out)
	}
	wantAPI := map[string]string{"NAMESPACE": api.Namespace, "NAME": "api", "REVISION": "f9eb344", "READY": "False (FetchFailed)",
		"LAST SYNC": "-", "OBJECTS": "0", "DRIFT": "0", "SUSPENDED": "True"}
	if diff := cmp.Diff(wantAPI, gotAPI); diff != "" {
		t.Errorf("get syncs -A, row of api (-want +got):\n%s\n%s", diff, all.out)
	}
	if strings.Contains(all.out, "\x1b[") {
		t.Errorf("colour in output that is not a terminal:\n%q", all.out)
	}

	one := runCLI(t, "get", "syncs", "-n", web.Namespace, "--kubeconfig", kubeconfig).expect(t, 0)
	rows = tableRows(t, one.out)
	if len(rows) != 1 || rows[0]["NAME"] != "web" {
		t.Errorf("get syncs -n %s lists %v, want web alone:\n%s", web.Namespace, rows, one.out)
	}
	if _, ok := rows[0]["NAMESPACE"]; ok {
		t.Errorf("get syncs -n has a NAMESPACE column:\n%s", one.out)
	}

	empty := runCLI(t, "get", "syncs", "-n", "no-such-namespace", "--kubeconfig", kubeconfig).expect(t, 0)
	if !strings.Contains(empty.out, "No Syncs found") {
		t.Errorf("an empty namespace prints %q, want it to say no Syncs were found", empty.out)
	}
}

func TestGetSyncsAsJSONAndYAMLHasTheDocumentedFields(t *testing.T) {
	web, _ := twoSyncs(t)
	kubeconfig := env.ControlPlane.KubeconfigPath()
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := runCLI(t, "get", "syncs", "-n", web.Namespace, "-o", format, "--kubeconfig", kubeconfig).expect(t, 0)
			var doc map[string][]map[string]any
			var err error
			if format == "json" {
				err = json.Unmarshal([]byte(r.out), &doc)
			} else {
				err = yaml.Unmarshal([]byte(r.out), &doc)
			}
			if err != nil || len(doc["syncs"]) != 1 {
				t.Fatalf("output is not {syncs: [one Sync]} (%v):\n%s", err, r.out)
			}
			got := doc["syncs"][0]
			delete(got, "lastSyncAt")
			want := map[string]any{"namespace": web.Namespace, "name": "web", "revision": shaWeb, "ready": "True", "reason": "Succeeded",
				"message": "applied 8e1a1e8: 0 created, 0 configured, 3 unchanged, 0 pruned", "objects": 3.0, "driftLast24h": 1.0,
				"driftIncidents": 2.0, "suspended": false, "cluster": "in-cluster"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("-o %s (-want +got):\n%s", format, diff)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer that a command may write while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestGetSyncsWatchPrintsTheTableAgainWhenASyncChangesUntilStopped(t *testing.T) {
	web, _ := twoSyncs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	cmd := NewRootCommand(&out, &out)
	cmd.SetArgs([]string{"get", "syncs", "-n", web.Namespace, "--watch", "--kubeconfig", env.ControlPlane.KubeconfigPath()})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() string {
			if s := out.String(); !ok(s) {
				return "output:\n" + s
			}
			return ""
		})
	}
	waitFor("the first table", func(s string) bool { return strings.Contains(s, "True") })

	cl := diffClusterClient(t)
	var s v1alpha1.Sync
	if err := cl.Get(ctx, web, &s); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonApplyFailed, Message: "ConfigMap/a/one apply failed"})
	if err := cl.Status().Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	waitFor("a second table with the new Ready", func(s string) bool { return strings.Contains(s, "False (ApplyFailed)") })
	tables := strings.Split(out.String(), "\n\n")
	if len(tables) < 2 || !strings.HasPrefix(tables[len(tables)-1], "NAME") {
		t.Errorf("the change is not printed as a whole new table:\n%s", out.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("get syncs --watch returned %v when stopped, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("get syncs --watch still runs 30s after it was stopped")
	}
}

func TestGetSyncsRefusesWrongFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"-n and -A together", []string{"-n", "a", "-A"}, "pass one of them"},
		{"an unknown output", []string{"-o", "wide"}, "use table, json or yaml"},
		{"an unknown context", []string{"--context", "nowhere"}, "nowhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"get", "syncs", "--kubeconfig", env.ControlPlane.KubeconfigPath()}, tt.args...)
			r := runCLI(t, args...).expect(t, 2)
			if !strings.Contains(r.errOut, tt.want) {
				t.Errorf("error %q does not say %q", r.errOut, tt.want)
			}
		})
	}
}
