package receiver

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
