package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// With an interval of an hour, a new commit reaches the cluster within
// the test only because `driftless reconcile` asks for it.
func TestReconcileWaitAppliesANewCommitNowAndPrintsTheOutcome(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	first := repo.Commit(t, "initial", map[string]string{"workloads/config.yaml": configMapIn(ns, "web-config", "v1")})
	a := startAgentIn(t, ns)
	key := diffCreateSync(t, cl, ns, repo.FileURL()) // interval: 1h
	a.Eventually("the Sync is Ready at the first commit", syncAppliedAt(key, first))
	kubeconfig := env.ControlPlane.KubeconfigPath()

	second := repo.Commit(t, "new greeting", map[string]string{"workloads/config.yaml": configMapIn(ns, "web-config", "v2")})
	r := runCLI(t, "reconcile", key.String(), "--wait", "--timeout", "1m", "--kubeconfig", kubeconfig).expect(t, 0)
	if want := "synced " + key.String() + " at " + second[:7]; !strings.Contains(r.out, want) {
		t.Errorf("reconcile --wait prints %q, want it to contain %q", r.out, want)
	}
	if want := "0 created, 1 configured"; !strings.Contains(r.out, want) {
		t.Errorf("reconcile --wait does not say what changed (%q): %s", want, r.out)
	}
	if !strings.Contains(r.errOut, "waiting for the agent to sync "+key.String()) {
		t.Errorf("no progress line while waiting: %q", r.errOut)
	}
	if v := configValue(t, ns, "web-config"); v != "v2" {
		t.Errorf("web-config greeting after reconcile = %q, want v2 from the second commit", v)
	}

	// Nothing new: the requested sync is still recorded, and answers.
	before := syncHistoryLen(t, key)
	r = runCLI(t, "reconcile", key.String(), "--wait", "--timeout", "1m", "-o", "json", "--kubeconfig", kubeconfig).expect(t, 0)
	var doc struct {
		Sync        string
		RequestedAt time.Time
		Result      historyRecord
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.out)
	}
	if doc.Sync != key.String() || doc.Result.Revision != second || doc.Result.Result != "Succeeded" || doc.Result.Unchanged != 1 {
		t.Errorf("reconcile of an up-to-date Sync = %+v, want a success at %s that compared the one object", doc, second[:7])
	}
	if after := syncHistoryLen(t, key); after != min(before+1, v1alpha1.MaxHistory) {
		t.Errorf("history has %d records after a requested sync, want %d", after, before+1)
	}

	// A failing sync exits 1 and says why.
	repo.Commit(t, "broken", map[string]string{"workloads/broken.yaml": "kind: [\n"})
	r = runCLI(t, "reconcile", key.String(), "--wait", "--timeout", "1m", "--kubeconfig", kubeconfig).expect(t, 1)
	if !strings.Contains(r.out, "sync failed: "+key.String()) || !strings.Contains(r.out, v1alpha1.ReasonBuildFailed) || !strings.Contains(r.out, "broken.yaml") {
		t.Errorf("a failed reconcile prints %q, want the reason %s and the file", r.out, v1alpha1.ReasonBuildFailed)
	}
}

func syncHistoryLen(t *testing.T, key client.ObjectKey) int {
	t.Helper()
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	return len(s.Status.History)
}

func TestReconcileOfASyncThatDoesNotExistExitsTwoAndSaysWhatToRun(t *testing.T) {
	diffClusterClient(t)
	ns := env.Namespace(t)
	r := runCLI(t, "reconcile", ns+"/nosuch", "--wait", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 2)
	for _, want := range []string{"no Sync named nosuch in namespace " + ns, "driftless get syncs -A"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("error lacks %q: %s", want, r.errOut)
		}
	}
	r = runCLI(t, "reconcile", "nosuch", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 2)
	if !strings.Contains(r.errOut, "NAMESPACE/NAME") {
		t.Errorf("a Sync without a namespace is refused with %q, want it to say NAMESPACE/NAME", r.errOut)
	}
}

func TestReconcileWaitWithNoAgentTimesOutWithExitOne(t *testing.T) {
	key := createSyncWithStatus(t, env.Namespace(t), "idle", false, v1alpha1.SyncStatus{})
	r := runCLI(t, "reconcile", key.String(), "--wait", "--timeout", "1s", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 1)
	if !strings.Contains(r.errOut, "is the agent running?") {
		t.Errorf("a timeout says %q, want it to ask whether the agent runs", r.errOut)
	}
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339Nano, s.Annotations["driftless.dev/requested-at"]); err != nil {
		t.Errorf("the request is not on the Sync: annotations %v", s.Annotations)
	}
}

func TestSuspendThenResumeSetsSpecSuspendAndSaysSo(t *testing.T) {
	key := createSyncWithStatus(t, env.Namespace(t), "web", false, v1alpha1.SyncStatus{})
	kubeconfig := env.ControlPlane.KubeconfigPath()
	suspended := func() bool {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), key, &s); err != nil {
			t.Fatal(err)
		}
		return s.Spec.Suspend
	}

	r := runCLI(t, "suspend", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
	if !suspended() || !strings.Contains(r.out, "suspended "+key.String()) {
		t.Errorf("after suspend: spec.suspend = %v, output %q", suspended(), r.out)
	}
	r = runCLI(t, "suspend", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
	if !strings.Contains(r.out, "already suspended") {
		t.Errorf("a second suspend prints %q, want it to say the Sync already was", r.out)
	}
	r = runCLI(t, "reconcile", key.String(), "--kubeconfig", kubeconfig).expect(t, 2)
	if !strings.Contains(r.errOut, "driftless resume "+key.String()) {
		t.Errorf("reconcile of a suspended Sync says %q, want it to say how to resume", r.errOut)
	}

	r = runCLI(t, "resume", key.String(), "-o", "json", "--kubeconfig", kubeconfig).expect(t, 0)
	var doc suspendReport
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.out)
	}
	if suspended() || doc != (suspendReport{Sync: key.String(), Suspended: false, Changed: true}) {
		t.Errorf("after resume: spec.suspend = %v, output %+v", suspended(), doc)
	}
}
