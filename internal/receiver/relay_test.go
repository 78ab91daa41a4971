package receiver

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/internal/controller"
)

// The relay's ConfigMap stays small whatever the rate of pushes: the
// newest 32 notices of the last 10 minutes.
func TestTheRelayKeepsTheNewestNoticesOfTheLastTenMinutes(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var notices []Notice
	for i := range 40 {
		notices = keepNotices(notices, Notice{ID: fmt.Sprint(i), At: metav1.NewTime(now.Add(time.Duration(i-40) * time.Second))}, now)
	}
	if len(notices) != relayKeep || notices[0].ID != "8" || notices[len(notices)-1].ID != "39" {
		t.Fatalf("kept %d notices, %s to %s; want the newest %d, 8 to 39", len(notices), notices[0].ID, notices[len(notices)-1].ID, relayKeep)
	}
	later := now.Add(10*time.Minute + 30*time.Second)
	notices = keepNotices(notices, Notice{ID: "new", At: metav1.NewTime(later)}, later)
	if len(notices) != 1 || notices[0].ID != "new" {
		t.Fatalf("after 10 minutes kept %d notices; want only the new one", len(notices))
	}
	if got := decodeNotices("not json"); got != nil {
		t.Fatalf("a ConfigMap that does not parse gave %v; want no notices (the next push rewrites it)", got)
	}
}

// A push another shard's agent received in the same second as this agent
// started wakes this agent's Syncs: the notice's time, in whole seconds
// once it is in the ConfigMap, is not taken for one before the start.
func TestTheRelayActsOnANoticeOfTheSecondItStarted(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	r, err := NewRelay(RelayOptions{Client: c, Namespace: "driftless", Syncs: c, Wake: make(chan controller.WakeUp)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		at   time.Time
		want bool
	}{
		{"received a moment after the start", time.Now(), true},
		{"received a minute before the start", time.Now().Add(-time.Minute), false},
	} {
		data, err := encodeNotices([]Notice{{ID: "1", At: metav1.NewTime(tc.at)}})
		if err != nil {
			t.Fatal(err)
		}
		var stored []Notice
		if err := json.Unmarshal([]byte(data), &stored); err != nil {
			t.Fatal(err)
		}
		if got := r.current(stored[0]); got != tc.want {
			t.Errorf("a notice %s (%s, stored as %s): acted on %v, want %v", tc.name, tc.at.Format(time.RFC3339Nano), stored[0].At.Format(time.RFC3339Nano), got, tc.want)
		}
	}
}
