package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/drift"
)

// etcdRequestLimit is etcd's default --max-request-bytes: a Sync larger
// than this can no longer be written.
const etcdRequestLimit = 1536 << 10

// bigValue is a ConfigMap value of size bytes that differs from every
// other (key, tag) only in its last bytes, so that only a hash tells two
// of them apart once they are cut short.
func bigValue(size, key int, tag string) string {
	end := fmt.Sprintf("%16s", fmt.Sprintf("k%02d-%s", key, tag))
	return strings.Repeat("x", size-len(end)) + end
}

// tail is the end of s, short enough for a test failure.
func tail(s string) string { return s[max(len(s)-80, 0):] }

func TestDriftOfA900KiBConfigMapEdited25TimesKeepsTheSyncWritable(t *testing.T) {
	const keys, size, edits = 12, 75 << 10, 25 // 900 KiB of data
	h := newHarness(t)
	var manifest strings.Builder
	fmt.Fprintf(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
	for k := range keys {
		fmt.Fprintf(&manifest, "  k%02d: %s\n", k, bigValue(size, k, "git"))
	}
	rev := h.repo.Commit(t, "initial", map[string]string{"config/big.yaml": manifest.String()})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Interval = metav1.Duration{Duration: time.Hour} })
	startAgent(t, false)
	h.waitReady("fleet", rev)

	var found []string // data.k00 as recorded for each edit
	for i := range edits {
		tag := fmt.Sprintf("e%02d", i)
		// kubectl edit by a different person each time: a full update
		// with its own field manager.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live := get(t, "v1", "ConfigMap", h.ns, "big")
			for k := range keys {
				_ = unstructured.SetNestedField(live.Object, bigValue(size, k, tag), "data", fmt.Sprintf("k%02d", k))
			}
			return c.Update(context.Background(), live, client.FieldOwner(fmt.Sprintf("kubectl-edit-%02d", i)))
		})
		if err != nil {
			t.Fatalf("edit %d: %v", i+1, err)
		}
		want := drift.BoundValue(bigValue(size, 0, tag))
		var got *v1alpha1.DriftIncident
		// Reverted at first, then Paused as a fight: recorded either way.
		eventually(t, fmt.Sprintf("an incident recording edit %d", i+1), func() bool {
			s := h.syncNow("fleet")
			for j, inc := range s.Status.Drift {
				if len(inc.Fields) > 0 && inc.Fields[0].Path == "data.k00" && inc.Fields[0].Found == want {
					got = &s.Status.Drift[j]
					return true
				}
			}
			return false
		})
		for _, f := range got.Fields {
			if len(f.Git) > drift.MaxValue || len(f.Found) > drift.MaxValue {
				t.Fatalf("edit %d: %s recorded with %d and %d bytes, want at most %d", i+1, f.Path, len(f.Git), len(f.Found), drift.MaxValue)
			}
			if strings.HasPrefix(f.Path, "data.") && !strings.Contains(f.Found, "(76800 bytes, sha256:") {
				t.Fatalf("edit %d: %s found value ending %q carries no size and hash", i+1, f.Path, tail(f.Found))
			}
		}
		if gitValue := drift.BoundValue(bigValue(size, 0, "git")); got.Fields[0].Git != gitValue {
			t.Errorf("edit %d: git value recorded as %q, want %q", i+1, got.Fields[0].Git, gitValue)
		}
		if len(got.Message) > drift.MaxMessage || !strings.Contains(got.Message, "sha256:") {
			t.Errorf("edit %d: message of %d bytes, want at most %d naming a hash: …%q", i+1, len(got.Message), drift.MaxMessage, tail(got.Message))
		}
		found = append(found, got.Fields[0].Found)
	}
	for i := 1; i < len(found); i++ {
		if found[i] == found[i-1] {
			t.Errorf("edits %d and %d read the same: %q", i, i+1, found[i])
		}
	}

	s := h.syncNow("fleet")
	t.Logf("after %d edits: %d incidents kept, status without inventory %d bytes", edits, len(s.Status.Drift), drift.StatusSize(&s.Status))
	if size := drift.StatusSize(&s.Status); size > drift.StatusBudget {
		t.Errorf("status without inventory takes %d bytes, want at most %d", size, drift.StatusBudget)
	}
	if raw, err := json.Marshal(s); err != nil || len(raw) > etcdRequestLimit {
		t.Errorf("Sync takes %d bytes (%v), want under etcd's limit of %d", len(raw), err, etcdRequestLimit)
	}
	if len(s.Status.Drift) == 0 || s.Status.Drift[0].Fields[0].Found != found[edits-1] {
		t.Errorf("the newest incident is not the last edit: %+v", s.Status.Drift)
	}
	// The Sync's status can still be written.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := h.syncNow("fleet")
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "TestWritable", Status: metav1.ConditionTrue, Reason: "Probe"})
		return c.Status().Patch(context.Background(), s, patch)
	})
	if err != nil {
		t.Errorf("a status write after 25 edits failed: %v", err)
	}
}
