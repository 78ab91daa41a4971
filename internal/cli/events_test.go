package cli

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/controller"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	eventsOnce     sync.Once
	eventsRecorder func(reporter string) events.EventRecorder
)

// recorderOf is an event recorder writing to the test control plane as
// the reporting controller reporter, as the agent's does.
func recorderOf(t *testing.T, reporter string) events.EventRecorder {
	t.Helper()
	eventsOnce.Do(func() {
		scheme := testenv.Scheme()
		b := events.NewBroadcaster(&events.EventSinkImpl{Interface: env.Clientset.EventsV1()})
		if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		eventsRecorder = func(reporter string) events.EventRecorder { return b.NewRecorder(scheme, reporter) }
	})
	return eventsRecorder(reporter)
}

// reconcileRecorded runs one sync of key as the agent would, with its
// events recorded.
func reconcileRecorded(t *testing.T, cl client.Client, key client.ObjectKey) {
	t.Helper()
	r := &controller.SyncReconciler{
		Client: cl, Reader: cl, Applier: cl,
		RenderOptions: engine.RenderOptions{Scope: engine.MapperScope{Mapper: cl.RESTMapper()}},
		Store:         controller.NewStore(),
		Recorder:      recorderOf(t, eventsReporter),
		CacheDir:      t.TempDir(),
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("reconcile %s: %v", key, err)
	}
}

type eventsJSON struct {
	Sync   string
	Events []eventRow
}

// eventsUntil runs `driftless events args -o json` until it shows n
// Events, or fails after a deadline.
func eventsUntil(t *testing.T, n int, args ...string) eventsJSON {
	t.Helper()
	var doc eventsJSON
	var out string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r := runCLI(t, append(append([]string{"events"}, args...), "-o", "json", "--kubeconfig", env.ControlPlane.KubeconfigPath())...).expect(t, 0)
		out = r.out
		doc = eventsJSON{}
		if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
			t.Fatalf("-o json: %v\n%s", err, r.out)
		}
		if len(doc.Events) >= n {
			return doc
		}
	}
	t.Fatalf("events shows %d Events, want %d:\n%s", len(doc.Events), n, out)
	return doc
}

func TestEventsOfASyncShowItsSyncsAndTheDriftOnItsObjectsOldestFirst(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "broken", map[string]string{"workloads/config.yaml": "kind: [\n"})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	reconcileRecorded(t, cl, key)
	eventsUntil(t, 1, key.String()) // the failure is written before the success
	repo.Commit(t, "fixed", map[string]string{"workloads/config.yaml": diffConfigMap("", "web-config", "v1")})
	reconcileRecorded(t, cl, key)

	// The drift controller's Event on the managed object, and another
	// controller's, which events leaves to kubectl.
	var cm corev1.ConfigMap
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	recorderOf(t, "someone-else").Eventf(&cm, nil, corev1.EventTypeNormal, "Touched", "Touch", "not driftless's")
	recorderOf(t, eventsReporter).Eventf(&cm, nil, corev1.EventTypeNormal, v1alpha1.ReasonDriftReverted, "Revert", "kubectl-edit changed data.key")

	doc := eventsUntil(t, 3, key.String())
	type shown struct{ Object, Type, Reason, Action string }
	var got []shown
	for _, e := range doc.Events {
		got = append(got, shown{e.Object, e.Type, e.Reason, e.Action})
	}
	want := []shown{
		{"Sync/fleet", "Warning", v1alpha1.ReasonBuildFailed, "Sync"},
		{"Sync/fleet", "Normal", v1alpha1.ReasonSucceeded, "Sync"},
		{"ConfigMap/web-config", "Normal", v1alpha1.ReasonDriftReverted, "Revert"},
	}
	if len(got) != len(want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if !strings.Contains(doc.Events[0].Note, "workloads/config.yaml") {
		t.Errorf("the failure's note does not name the file: %q", doc.Events[0].Note)
	}

	table := runCLI(t, "events", key.String(), "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0)
	rows := tableRows(t, table.out)
	if len(rows) != 3 || rows[0]["REASON"] != v1alpha1.ReasonBuildFailed || rows[2]["NOTE"] != "kubectl-edit changed data.key" || rows[2]["LAST SEEN"] == "" {
		t.Errorf("the table is not the three Events, oldest first:\n%s", table.out)
	}

	// Without a Sync: the Events of the namespace's Syncs only.
	all := eventsUntil(t, 2, "-n", ns)
	for _, e := range all.Events {
		if e.Object != "Sync/fleet" {
			t.Errorf("events -n %s shows an Event regarding %s", ns, e.Object)
		}
	}
	if len(all.Events) != 2 {
		t.Errorf("events -n %s shows %d Events, want the Sync's 2", ns, len(all.Events))
	}
}

func TestEventsRefusesWrongArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a Sync and -A", []string{"events", "a/b", "-A"}, "leave out -n and -A"},
		{"-n and -A", []string{"events", "-n", "x", "-A"}, "pass one of them"},
		{"a Sync without its namespace", []string{"events", "web"}, "NAMESPACE/NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append(tc.args, "--kubeconfig", env.ControlPlane.KubeconfigPath())...)
			if r.code == 0 || !strings.Contains(r.errOut, tc.want) {
				t.Errorf("exit %d, error %q; want non-zero and %q", r.code, r.errOut, tc.want)
			}
		})
	}
}

func TestEventsWatchPrintsEachNewEventOfTheSyncUntilStopped(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "broken", map[string]string{"workloads/config.yaml": "kind: [\n"})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	reconcileRecorded(t, cl, key)
	eventsUntil(t, 1, key.String())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	cmd := NewRootCommand(&out, &out)
	cmd.SetArgs([]string{"events", key.String(), "--watch", "--kubeconfig", env.ControlPlane.KubeconfigPath()})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(out.String()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s; output:\n%s", what, out.String())
			}
		}
	}
	waitFor("the Events so far", func(s string) bool { return strings.Contains(s, v1alpha1.ReasonBuildFailed) })

	repo.Commit(t, "fixed", map[string]string{"workloads/config.yaml": diffConfigMap("", "web-config", "v1")})
	reconcileRecorded(t, cl, key)
	waitFor("the new Event", func(s string) bool { return strings.Contains(s, "applied ") })
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "LAST SEEN") || !strings.Contains(lines[2], v1alpha1.ReasonSucceeded) {
		t.Errorf("want the header, the failure, then the success as a new row:\n%s", out.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("events --watch returned %v when stopped, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("events --watch still runs 30s after it was stopped")
	}
}
