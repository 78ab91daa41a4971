package reliability

import (
	"context"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// The branch is force-pushed back to an older commit: the Sync follows
// it (the cluster goes back to that commit) and says so in its Ready
// message, its history and an Event.
func TestForcePushToAnOlderCommitIsFollowedAndReported(t *testing.T) {
	ns := env.Namespace(t)
	srv := testenv.NewGitServer(t)
	repo := srv.NewRepo(t, "forced")
	older := repo.Commit(t, "older", map[string]string{"config.yaml": configMapInWave("config", "0")})
	key := newSync(t, ns, "forced", repo.FileURL(), nil)
	startInProcessAgent(t, ns, nil)
	testenv.Eventually(t, 2*time.Minute, "the older revision is applied", appliedAt(key, older))
	newer := repo.Commit(t, "newer", map[string]string{"extra.yaml": configMapInWave("extra", "0")})
	testenv.Eventually(t, time.Minute, "the newer revision is applied", appliedAt(key, newer))

	repo.ForcePush(t, older)
	testenv.Eventually(t, time.Minute, "the Sync follows the branch back", appliedAt(key, older))
	if exists(t, ns, "extra") {
		t.Error("ConfigMap extra, only in the newer revision, was not pruned after the force-push")
	}
	want := "branch main moved back from " + newer[:7] + " to " + older[:7]
	s, err := getSync(key)
	if err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); ready == nil || !strings.Contains(ready.Message, want) {
		t.Errorf("Ready = %s, want a message saying %q", condString(ready), want)
	}
	if len(s.Status.History) == 0 || !strings.Contains(s.Status.History[0].Message, want) {
		t.Errorf("the newest history record does not say %q: %+v", want, s.Status.History)
	}
	testenv.Eventually(t, 10*time.Second, "an Event says the branch moved back", func() string {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == key.Name && strings.Contains(e.Note, want) {
				return ""
			}
			notes = append(notes, e.Note)
		}
		return strings.Join(notes, "\n")
	})
}
