package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Syncs waiting for a rollout watch git for a fix (a new commit ends the
// wait), through the mirror's shared resolve: however many of them wait,
// the git host sees at most one ls-remote of the repository per
// revisionPoll in total, not one per Sync per revisionPoll.
func TestSyncsWaitingOnARolloutCostTheGitHostOneLsRemotePerInterval(t *testing.T) {
	h := newHarness(t)
	const waiting = 6
	name := func(i int) string { return fmt.Sprintf("app-%d", i) }
	files := map[string]string{}
	for i := range waiting {
		// No controller-manager runs here: a Deployment never rolls out,
		// so each Sync waits on its wave 0 until its timeout.
		files[name(i)+"/web.yaml"] = deployment(h.ns, name(i), "64Mi")
		files[name(i)+"/after.yaml"] = waved(configMap(name(i)+"-after", "v1"), "1")
	}
	revision := h.repo.Commit(t, "a rollout that never ends", files)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: h.ns},
		Data:       map[string][]byte{"identity": h.srv.DeployKey, "known_hosts": h.srv.KnownHosts()},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	startAgentWith(t, func(o *Options) { o.Concurrency = waiting })
	for i := range waiting {
		h.createSync(name(i), func(s *v1alpha1.Sync) {
			s.Spec.Source.Git.URL = h.repo.SSHURL()
			s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git"}
			s.Spec.Paths = []string{name(i)}
			s.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
		})
	}
	for i := range waiting {
		eventually(t, "Sync "+name(i)+" to wait for its wave 0", func() bool {
			p := h.syncNow(name(i)).Status.Progress
			return p != nil && p.Revision == revision && p.Wave == 0
		})
	}

	// The measure is over a window of a few polls, whatever the clock:
	// the budget is computed from the time that passed.
	before, start := h.repo.UploadPacks(), time.Now()
	<-time.After(4 * revisionPoll)
	got, elapsed := h.repo.UploadPacks()-before, time.Since(start)
	budget := int(elapsed/revisionPoll) + 1
	t.Logf("%d Syncs waiting on a rollout for %s: %d ls-remotes", waiting, elapsed.Round(time.Millisecond), got)
	if got > budget {
		t.Errorf("%d Syncs waiting on a rollout for %s cost the git host %d ls-remotes; want at most one per %s in total (%d)",
			waiting, elapsed.Round(time.Second), got, revisionPoll, budget)
	}
	if got == 0 {
		t.Errorf("%d Syncs waiting on a rollout for %s asked git nothing; a new commit would not end their wait", waiting, elapsed.Round(time.Second))
	}
}
