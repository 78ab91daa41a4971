package receiver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docs/webhooks.md states the limits; they must be the code's.
func TestTheWebhooksPageStatesTheDefaultLimits(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	l := DefaultLimits()
	if l.EventInterval != time.Minute || maxTracked != 10000 {
		t.Fatalf("the event interval (%s) or the number of IDs kept (%d) changed: update docs/webhooks.md and this test", l.EventInterval, maxTracked)
	}
	for _, want := range []string{
		fmt.Sprintf("| Body size | %d MiB.", l.MaxBodyBytes>>20),
		fmt.Sprintf("| Deliveries per remote address | %g requests a second, bursts of %d. |", float64(l.PerAddress), l.PerAddressBurst),
		fmt.Sprintf("| Refused requests per remote address | %g request a second, bursts of %d. |", float64(l.RefusedPerAddress), l.RefusedPerAddressBurst),
		fmt.Sprintf("| Deliveries from all addresses together | %g requests a second, bursts of %d. |", float64(l.Global), l.GlobalBurst),
		fmt.Sprintf("| Refused requests from all addresses together | %g requests a second, bursts of %d. |", float64(l.GlobalRefused), l.GlobalRefusedBurst),
		fmt.Sprintf("remembered for %d minutes, per endpoint, up to 10,000 IDs", int(l.ReplayWindow.Minutes())),
		fmt.Sprintf("within %d\nminutes is ignored", int(l.ReplayWindow.Minutes())),
		fmt.Sprintf("| Secret cache | %d seconds. |", int(l.SecretTTL.Seconds())),
		fmt.Sprintf("caches it for %d seconds", int(l.SecretTTL.Seconds())),
		"| Warning events | At most one a minute per endpoint.",
		fmt.Sprintf("did not take the Syncs within %d s", int(l.WakeTimeout.Seconds())),
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("docs/webhooks.md does not say %q", want)
		}
	}
}
