package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func TestHoldChoosesTheRevisionOrSaysWhatToGive(t *testing.T) {
	good, bad, older := strings.Repeat("a1", 20), strings.Repeat("b2", 20), strings.Repeat("a9", 20)
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	s.Status.LastAppliedRevision = bad
	s.Status.History = []v1alpha1.SyncRecord{
		{Revision: bad, Result: v1alpha1.ResultSucceeded},
		{Revision: bad, Result: v1alpha1.ResultFailed},
		{Revision: good, Result: v1alpha1.ResultSucceeded},
		{Revision: older, Result: v1alpha1.ResultSucceeded},
	}
	for _, tc := range []struct {
		name     string
		rev      string
		previous bool
		want     string
		err      string
	}{
		{name: "--previous is the newest success before the one applied now", previous: true, want: good},
		{name: "neither flag holds where the Sync is", want: bad},
		{name: "a full hash is taken as it is", rev: strings.Repeat("c3", 20), want: strings.Repeat("c3", 20)},
		{name: "a prefix of one revision of the history is that revision", rev: "A1A1", want: good},
		{name: "a prefix of two revisions is refused, naming both", rev: "a", err: "is the start of 2 revisions in the status.history of shop/web (" + good + ", " + older + "): give more of it"},
		{name: "a prefix of none is refused", rev: "dead", err: "no revision in the status.history of shop/web starts with dead: give the full commit hash"},
		{name: "a branch name is not a revision", rev: "main", err: `--revision "main" is not a commit hash`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := holdRevision(s, tc.rev, tc.previous)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("holdRevision = %s, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("holdRevision = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	// Only the revision applied now succeeded: --previous has nothing.
	s.Status.History = s.Status.History[:2]
	if _, err := holdRevision(s, "", true); err == nil || !strings.Contains(err.Error(), "name the commit with --revision") {
		t.Errorf("--previous with no earlier success: %v, want an error pointing to --revision", err)
	}
}

// TestHoldThePreviousRevisionThenRelease is the incident from the command
// line: a bad commit is applied; `hold --previous` brings back the one
// before and get, history and explain say so; `release` applies the tip.
func TestHoldThePreviousRevisionThenRelease(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	good := repo.Commit(t, "good", map[string]string{"workloads/config.yaml": configMapIn(ns, "web-config", "v1")})
	a := startAgent(t,
		"--kubeconfig", env.ControlPlane.KubeconfigPath(),
		"--namespace", ns,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
		"--cache-dir", t.TempDir(),
	)
	key := diffCreateSync(t, cl, ns, repo.FileURL()) // interval: 1h
	a.Eventually("the Sync is Ready at the good commit", syncAppliedAt(key, good))
	kubeconfig := env.ControlPlane.KubeconfigPath()
	bad := repo.Commit(t, "bad", map[string]string{"workloads/config.yaml": configMapIn(ns, "web-config", "v2")})
	runCLI(t, "reconcile", key.String(), "--wait", "--timeout", "1m", "--kubeconfig", kubeconfig).expect(t, 0)

	r := runCLI(t, "hold", key.String(), "--previous", "--kubeconfig", kubeconfig).expect(t, 2)
	if !strings.Contains(r.errOut, "--reason is required") {
		t.Errorf("hold without a reason says %q, want that --reason is required", r.errOut)
	}
	r = runCLI(t, "hold", key.String(), "--revision", "0000000", "--reason", "x", "--kubeconfig", kubeconfig).expect(t, 2)
	if !strings.Contains(r.errOut, "no revision in the status.history of "+key.String()+" starts with 0000000") {
		t.Errorf("hold at an unknown prefix says %q", r.errOut)
	}

	r = runCLI(t, "hold", key.String(), "--previous", "--reason", "payment errors", "--kubeconfig", kubeconfig).expect(t, 0)
	if want := "held " + key.String() + " at " + good[:7]; !strings.Contains(r.out, want) {
		t.Errorf("hold prints %q, want %q", r.out, want)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	me := review.Status.UserInfo.Username
	a.Eventually("the Sync held at the good commit", func() string {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), key, &s); err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		want := fmt.Sprintf("held at %s claimed by %s: payment errors; 1 commit pending (tip %s)", good[:7], me, bad[:7])
		if ready == nil || ready.Reason != v1alpha1.ReasonHeld || !strings.HasPrefix(ready.Message, want) || configValue(t, ns, "web-config") != "v1" {
			return fmt.Sprintf("Ready = %+v, web-config %q; want Held, %q, and v1", ready, configValue(t, ns, "web-config"), want)
		}
		return ""
	})

	r = runCLI(t, "get", "syncs", "-n", ns, "--kubeconfig", kubeconfig).expect(t, 0)
	if !strings.Contains(r.out, "Held (1 pending)") || !strings.Contains(r.out, good[:7]) {
		t.Errorf("get syncs does not show the hold and the commit pending:\n%s", r.out)
	}
	r = runCLI(t, "history", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
	if !strings.Contains(r.out, "Succeeded (Held)") || !strings.Contains(r.out, "Held at "+good[:7]+" by "+me) || !strings.Contains(r.out, "driftless release "+key.String()) {
		t.Errorf("history does not mark the held sync and the hold:\n%s", r.out)
	}
	r = runCLI(t, "explain", "configmap/web-config", "-n", ns, "--kubeconfig", kubeconfig).expect(t, 0)
	if !strings.Contains(r.out, "Held:") || !strings.Contains(r.out, "the Sync applies "+good[:7]+", not its branch's tip") {
		t.Errorf("explain does not say the object is as the held revision has it:\n%s", r.out)
	}

	r = runCLI(t, "release", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
	if want := "released " + key.String() + " (held at " + good[:7] + ")"; !strings.Contains(r.out, want) {
		t.Errorf("release prints %q, want %q", r.out, want)
	}
	a.Eventually("the released Sync at the tip", func() string {
		if msg := syncAppliedAt(key, bad)(); msg != "" {
			return msg
		}
		if v := configValue(t, ns, "web-config"); v != "v2" {
			return "web-config is " + v + ", want the tip's v2"
		}
		return ""
	})
	r = runCLI(t, "release", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
	if !strings.Contains(r.out, "was not held; nothing to do") {
		t.Errorf("a second release prints %q", r.out)
	}
}
