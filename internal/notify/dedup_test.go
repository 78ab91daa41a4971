package notify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driftless/driftless/api/v1alpha1"
)

var (
	t0   = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	shop = types.NamespacedName{Namespace: "team-a", Name: "shop"}
)

func testConfig() Config {
	c := Config{}
	if err := c.complete("."); err != nil {
		panic(err)
	}
	return c
}

func failure(msg string) notice {
	return notice{sync: shop, event: Failed, reason: "BuildFailed", message: msg, revision: "0123456789abcdef"}
}

func ready(changes bool) notice {
	return notice{sync: shop, event: Succeeded, reason: "Succeeded", changes: changes, message: "applied 0123456: 1 configured"}
}

func revert(obj string) notice {
	return notice{sync: shop, event: DriftReverted, reason: "DriftReverted", message: obj + ": reverted spec.replicas: git 3, found 5"}
}

func events(ms []Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Event))
	}
	return out
}

func TestTenIdenticalFailuresSendOneMessage(t *testing.T) {
	d := newDeduper(testConfig())
	var sent []Message
	for i := range 10 {
		sent = append(sent, d.observe(failure("apps/web.yaml: yaml: line 3: did not find expected key"), t0.Add(time.Duration(i)*time.Minute))...)
	}
	if len(sent) != 1 || sent[0].Event != Failed {
		t.Fatalf("sent %v, want one failed message", events(sent))
	}
	if !strings.Contains(sent[0].Summary, "team-a/shop") || !strings.Contains(sent[0].Summary, "0123456") ||
		!strings.Contains(sent[0].Detail, "apps/web.yaml") {
		t.Errorf("message %+v does not say which Sync, which revision and which file", sent[0])
	}
}

func TestAChangedFailureIsSentAgain(t *testing.T) {
	d := newDeduper(testConfig())
	a := d.observe(failure("apps/web.yaml: bad"), t0)
	b := d.observe(failure("apps/db.yaml: bad"), t0.Add(time.Minute))
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("sent %v then %v, want one message for each distinct failure", events(a), events(b))
	}
}

func TestAnUnchangedFailureIsRemindedAfterTheInterval(t *testing.T) {
	cfg := testConfig()
	cfg.Reminder.Duration = 6 * time.Hour
	d := newDeduper(cfg)
	d.observe(failure("bad"), t0)
	var before []Message
	for i := 1; i <= 5; i++ {
		before = append(before, d.observe(failure("bad"), t0.Add(time.Duration(i)*time.Hour))...)
	}
	if len(before) != 0 {
		t.Fatalf("sent %v within the reminder interval, want nothing", events(before))
	}
	after := d.observe(failure("bad"), t0.Add(6*time.Hour))
	if len(after) != 1 || !strings.Contains(after[0].Summary, "still failing") || after[0].Count != 6 {
		t.Fatalf("after 6h sent %+v, want one reminder counting 6 repeats", after)
	}
	if again := d.observe(failure("bad"), t0.Add(7*time.Hour)); len(again) != 0 {
		t.Errorf("sent %v an hour after the reminder, want nothing", events(again))
	}
}

func TestAFailingSyncThatBecomesReadySendsRecovered(t *testing.T) {
	d := newDeduper(testConfig())
	d.observe(failure("bad"), t0)
	got := d.observe(ready(false), t0.Add(5*time.Minute))
	if len(got) != 1 || got[0].Event != Recovered || !strings.Contains(got[0].Summary, "BuildFailed") {
		t.Fatalf("sent %+v, want one recovered message naming the failure", got)
	}
	if again := d.observe(ready(false), t0.Add(6*time.Minute)); len(again) != 0 {
		t.Errorf("a Ready Sync without changes sent %v, want nothing", events(again))
	}
	if again := d.observe(failure("bad"), t0.Add(7*time.Minute)); len(again) != 1 {
		t.Errorf("the same failure after recovery sent %v, want it again", events(again))
	}
}

func TestSucceededIsSentOnlyWithChanges(t *testing.T) {
	d := newDeduper(testConfig())
	if got := d.observe(ready(false), t0); len(got) != 0 {
		t.Errorf("a sync without changes sent %v", events(got))
	}
	if got := d.observe(ready(true), t0); len(got) != 1 || got[0].Event != Succeeded {
		t.Errorf("a sync with changes sent %v, want succeeded-with-changes", events(got))
	}
}

func TestAFlappingSyncIsSummarised(t *testing.T) {
	d := newDeduper(testConfig()) // more than 3 flips in 10m
	var sent []Message
	now := t0
	for i := range 10 {
		now = t0.Add(time.Duration(i) * 30 * time.Second)
		if i%2 == 0 {
			sent = append(sent, d.observe(failure("bad"), now)...)
		} else {
			sent = append(sent, d.observe(ready(false), now)...)
		}
	}
	want := []string{"failed", "recovered", "failed", "flapping"}
	if strings.Join(events(sent), ",") != strings.Join(want, ",") {
		t.Fatalf("10 flips sent %v, want %v", events(sent), want)
	}
	if got := d.flush(now.Add(5 * time.Minute)); len(got) != 0 {
		t.Errorf("flush while still within the flap window sent %v", events(got))
	}
	got := d.flush(now.Add(11 * time.Minute))
	if len(got) != 1 || got[0].Event != Recovered || !strings.Contains(got[0].Summary, "stopped flapping") {
		t.Fatalf("after a quiet flap window sent %+v, want one 'stopped flapping' message", got)
	}
	if again := d.observe(failure("bad"), now.Add(12*time.Minute)); len(again) != 1 || again[0].Event != Failed {
		t.Errorf("a failure after flapping ended sent %v, want it", events(again))
	}
}

func TestABurstOfDriftRevertsIsOneMessageWithACount(t *testing.T) {
	d := newDeduper(testConfig()) // 1m window
	for i := range 7 {
		obj := "Deployment/team-a/web"
		if i%3 == 0 {
			obj = "ConfigMap/team-a/settings"
		}
		if got := d.observe(revert(obj), t0.Add(time.Duration(i)*5*time.Second)); len(got) != 0 {
			t.Fatalf("a revert was sent at once (%v); it should wait for the window", events(got))
		}
	}
	if got := d.flush(t0.Add(30 * time.Second)); len(got) != 0 {
		t.Fatalf("sent %v before the window closed", events(got))
	}
	got := d.flush(t0.Add(time.Minute))
	if len(got) != 1 || got[0].Count != 7 ||
		!strings.Contains(got[0].Summary, "reverted 7 drifts") || !strings.Contains(got[0].Summary, "Deployment/team-a/web (4)") {
		t.Fatalf("sent %+v, want one message counting 7 reverts of 2 objects", got)
	}
	if again := d.flush(t0.Add(3 * time.Minute)); len(again) != 0 {
		t.Errorf("the burst was sent twice: %v", events(again))
	}
}

func TestMemoryStaysBoundedOverManyDistinctMessagesAndSyncs(t *testing.T) {
	cfg := testConfig()
	cfg.Reminder.Duration = time.Hour
	d := newDeduper(cfg)
	maxSent, maxSyncs := 0, 0
	// A week of one Sync applying a new revision every minute, and a new
	// short-lived Sync every ten minutes, flushed as the dispatcher does.
	for i := range 7 * 24 * 60 {
		now := t0.Add(time.Duration(i) * time.Minute)
		n := ready(true)
		n.message = fmt.Sprintf("applied %07x: 1 configured", i)
		if got := d.observe(n, now); len(got) != 1 {
			t.Fatalf("a new revision applied sent %v, want it", events(got))
		}
		if i%10 == 0 {
			other := ready(true)
			other.sync = types.NamespacedName{Namespace: "team-b", Name: fmt.Sprintf("preview-%d", i)}
			d.observe(other, now)
		}
		d.flush(now)
		maxSent = max(maxSent, len(d.syncs[shop].sent))
		maxSyncs = max(maxSyncs, len(d.syncs))
	}
	// An hour of messages a minute, and the Syncs heard from within the
	// hour (plus one for the clock's edges).
	if maxSent > 61 || maxSyncs > 8 {
		t.Errorf("after a week the deduper held up to %d sent messages of one Sync and %d Syncs; want at most 61 and 8 (an hour's worth)", maxSent, maxSyncs)
	}
}

func TestForgettingAQuietSyncChangesNoDecision(t *testing.T) {
	cfg := testConfig()
	cfg.Reminder.Duration = time.Hour
	d := newDeduper(cfg)
	d.observe(failure("bad"), t0)
	d.flush(t0.Add(5 * time.Hour))
	if got := d.observe(failure("bad"), t0.Add(5*time.Hour)); len(got) != 1 || !strings.Contains(got[0].Summary, "still failing") {
		t.Errorf("a Sync failing quietly for 5h sent %+v, want a reminder: its state must survive a flush", got)
	}
	d.observe(ready(false), t0.Add(6*time.Hour))
	d.flush(t0.Add(8 * time.Hour))
	if _, ok := d.syncs[shop]; ok {
		t.Errorf("a Ready Sync quiet for 2h (reminder 1h, flap window 10m) is still held")
	}
	if got := d.observe(failure("bad"), t0.Add(8*time.Hour)); len(got) != 1 || got[0].Event != Failed || strings.Contains(got[0].Summary, "still") {
		t.Errorf("a new failure after the Sync was forgotten sent %+v, want a plain failed message", got)
	}
}

func TestADeletedSyncIsForgottenAndItsGatheredRevertsAreSent(t *testing.T) {
	d := newDeduper(testConfig())
	d.observe(failure("bad"), t0)
	d.observe(revert("Deployment/team-a/web"), t0.Add(time.Second))
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: shop.Namespace, Name: shop.Name}}
	n, ok := noticeOf(s, corev1.EventTypeNormal, v1alpha1.ReasonDeleted, "Delete", "Sync deleted (deletionPolicy Delete)")
	if !ok {
		t.Fatal("the deletion event is not a notice")
	}
	got := d.observe(n, t0.Add(2*time.Second))
	if len(got) != 1 || got[0].Event != DriftReverted {
		t.Errorf("the deletion sent %v, want the gathered drift revert", events(got))
	}
	if len(d.syncs) != 0 {
		t.Errorf("the deleted Sync's state is still held")
	}
	if n, ok := noticeOf(s, corev1.EventTypeWarning, v1alpha1.ReasonDeletionFailed, "Delete", "retrying"); ok {
		t.Errorf("a deletion that is still retrying became notice %+v; the Sync is not gone yet", n)
	}
}

// Image automation: a commit is one message, in PullRequest mode the pull
// request's event stands for the commit, Report mode sends nothing, and an
// unchanged failure is sent once per reminder.
func TestImageUpdatesNotifyOncePerChange(t *testing.T) {
	d := newDeduper(testConfig())
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: shop.Namespace, Name: shop.Name},
		Spec: v1alpha1.SyncSpec{ImageUpdate: &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdateCommit}}}
	s.Status.LastAppliedRevision = "fedcba9876543210"
	observe := func(eventtype, reason, message string, at time.Duration) []Message {
		n, ok := noticeOf(s, eventtype, reason, "ImageUpdate", message)
		if !ok {
			return nil
		}
		return d.observe(n, t0.Add(at))
	}
	got := observe(corev1.EventTypeNormal, v1alpha1.ReasonImageUpdateCommitted, "committed 0123456 to branch main: apps/app.yaml:15", 0)
	if len(got) != 1 || got[0].Event != ImageUpdated || !strings.Contains(got[0].Detail, "committed 0123456") || got[0].Revision != "" {
		t.Errorf("a commit sent %+v, want one image-updated message naming the commit and no applied revision", got)
	}
	if got := observe(corev1.EventTypeNormal, v1alpha1.ReasonImageUpdatePending, "Report mode, nothing committed", time.Minute); len(got) != 0 {
		t.Errorf("Report mode's pending updates sent %v", events(got))
	}
	for i := range 5 {
		got := observe(corev1.EventTypeWarning, v1alpha1.ReasonImageUpdateFailed, "push: permission denied", time.Duration(i+2)*time.Minute)
		if want := map[bool]int{true: 1, false: 0}[i == 0]; len(got) != want {
			t.Errorf("failure %d sent %v, want %d message(s)", i+1, events(got), want)
		}
	}
	if got := observe(corev1.EventTypeWarning, v1alpha1.ReasonImageUpdateFailed, "push: permission denied", 25*time.Hour); len(got) != 1 || got[0].Event != ImageUpdateFailed {
		t.Errorf("the failure after the reminder sent %v, want image-update-failed again", events(got))
	}

	s.Spec.ImageUpdate.Mode = v1alpha1.ImageUpdatePullRequest
	if got := observe(corev1.EventTypeNormal, v1alpha1.ReasonImageUpdateCommitted, "committed 1111111 to branch driftless/images", 26*time.Hour); len(got) != 0 {
		t.Errorf("PullRequest mode's commit sent %v; the pull request's message says it", events(got))
	}
	if got := observe(corev1.EventTypeNormal, v1alpha1.ReasonImageUpdatePullRequest, "open pull request #3", 26*time.Hour); len(got) != 1 || got[0].Event != ImageUpdated {
		t.Errorf("the pull request sent %v, want image-updated", events(got))
	}
}
