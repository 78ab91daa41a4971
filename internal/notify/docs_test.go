package notify

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/driftless/driftless/api/v1alpha1"
)

// TestDocsMatchTheCode keeps docs/notifications.md's events and defaults
// equal to the code's.
func TestDocsMatchTheCode(t *testing.T) {
	b, err := os.ReadFile("../../docs/notifications.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	dur := func(d time.Duration) string {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	o := DefaultOptions()
	wants := []string{
		fmt.Sprintf("| `reminder` | `%s` |", dur(DefaultReminder)),
		fmt.Sprintf("| `driftWindow` | `%s` |", dur(DefaultDriftWindow)),
		fmt.Sprintf("| `flapWindow`, `flapLimit` | `%s`, `%d` |", dur(DefaultFlapWindow), DefaultFlapLimit),
		fmt.Sprintf("queue of %d", o.QueueSize),
		fmt.Sprintf("up to %d times, %s per attempt", o.Attempts, o.Timeout),
		fmt.Sprintf("back-off from %s doubling up to %s", o.Backoff, dur(o.MaxBackoff)),
		SignatureHeader + ": sha256=",
		fmt.Sprintf("at most %d characters", MaxDescription),
		fmt.Sprintf("`--cluster-name` (default `%s`)", DefaultCluster),
		fmt.Sprintf("`address` defaults to `%s`", DefaultAddresses[TypeGitHubStatus]),
		fmt.Sprintf("# default %s", DefaultAddresses[TypeGitLabStatus]),
		"`driftless/<cluster>/<namespace>/<name>`",
		fmt.Sprintf("at most %d failing Syncs and %d commit statuses", MaxPersisted, MaxPersisted),
		fmt.Sprintf("at most every %d seconds", int(o.FlushEvery.Seconds())),
		"`" + v1alpha1.CommitStatusRepositoryAnnotation + "`",
	}
	for _, typ := range targetTypes {
		wants = append(wants, "`"+typ+"`")
	}
	for _, e := range Events {
		wants = append(wants, "| `"+string(e)+"` |")
	}
	for _, w := range wants {
		if !strings.Contains(doc, w) {
			t.Errorf("docs/notifications.md does not say %q; change the doc to match the code", w)
		}
	}
}
