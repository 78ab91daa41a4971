package drift

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
)

const kib900 = 900 << 10

func TestDriftValuesAreBoundedAndKeepAHash(t *testing.T) {
	large := strings.Repeat("x", kib900)
	largeOther := large[:kib900-1] + "y"
	sum := sha256.Sum256([]byte(large))
	tests := []struct {
		name  string
		value string
		want  func(t *testing.T, got string)
	}{
		{"a short value is kept as is", "512Mi", func(t *testing.T, got string) {
			if got != "512Mi" {
				t.Errorf("got %q", got)
			}
		}},
		{"a masked Secret value stays masked", masked, func(t *testing.T, got string) {
			if got != masked {
				t.Errorf("got %q", got)
			}
		}},
		{"a value of exactly the bound is kept as is", strings.Repeat("a", MaxValue), func(t *testing.T, got string) {
			if got != strings.Repeat("a", MaxValue) {
				t.Errorf("got %q", got)
			}
		}},
		{"a 900 KiB value shows its start, its size and its hash", large, func(t *testing.T, got string) {
			want := fmt.Sprintf("… (%d bytes, sha256:%x)", kib900, sum[:6])
			if !strings.HasPrefix(got, "xxxxxxxx") || !strings.HasSuffix(got, want) {
				t.Errorf("got %q, want a prefix of the value and %q", got, want)
			}
		}},
		{"two long values differing in their last byte read differently", largeOther, func(t *testing.T, got string) {
			if got == BoundValue(large) {
				t.Errorf("both values read %q", got)
			}
		}},
		{"a long value is cut between characters", strings.Repeat("é", kib900/2), func(t *testing.T, got string) {
			if !utf8.ValidString(got) {
				t.Errorf("got invalid UTF-8 %q", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BoundValue(tt.value)
			if len(got) > MaxValue {
				t.Errorf("bounded value has %d bytes, want at most %d", len(got), MaxValue)
			}
			if again := BoundValue(got); again != got {
				t.Errorf("bounding again changed %q to %q", got, again)
			}
			tt.want(t, got)
		})
	}
}

func TestDriftOfALargeConfigMapIsBoundedAndOfALargeSecretMasked(t *testing.T) {
	gitValue, foundValue := strings.Repeat("g", kib900), strings.Repeat("f", kib900)
	manifest := func(kind, key, value string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: %s\nmetadata: {name: big}\n%s: {big: %s}\n", kind, key, value)
	}
	t.Run("a ConfigMap value is bounded with its hash", func(t *testing.T) {
		desired := parse(t, manifest("ConfigMap", "data", gitValue))
		live := parse(t, manifest("ConfigMap", "data", foundValue))
		got := Attribute(desired, desired.DeepCopy(), live, "driftless")
		if len(got) != 1 {
			t.Fatalf("Attribute = %d changes, want 1", len(got))
		}
		if got[0].Git != BoundValue(gitValue) || got[0].Found != BoundValue(foundValue) {
			t.Errorf("values not bounded with a hash: git %q, found %q", got[0].Git, got[0].Found)
		}
	})
	t.Run("a structured value is bounded with its hash", func(t *testing.T) {
		desired := parse(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {ports: [80, 443]}\n")
		live := desired.DeepCopy()
		ports := make([]any, 1000)
		for i := range ports {
			ports[i] = int64(8000 + i)
		}
		_ = unstructured.SetNestedSlice(live.Object, ports, "spec", "ports")
		got := Attribute(desired, desired.DeepCopy(), live, "driftless")
		if len(got) != 1 || len(got[0].Found) > MaxValue || !strings.Contains(got[0].Found, "sha256:") {
			t.Errorf("Attribute = %q, want one bounded value with a hash", got)
		}
	})
	t.Run("a Secret value shows neither the value nor its hash", func(t *testing.T) {
		desired := parse(t, manifest("Secret", "stringData", gitValue))
		live := parse(t, manifest("Secret", "stringData", foundValue))
		got := Attribute(desired, desired.DeepCopy(), live, "driftless")
		if len(got) != 1 || got[0].Git != masked || got[0].Found != masked {
			t.Errorf("Attribute = %q, want both sides masked as %q", got, masked)
		}
	})
}

// incident is a drift incident at minute m with n fields whose values
// are raw (as an agent before bounding wrote them) of size bytes each.
func incident(m, n, size int) v1alpha1.DriftIncident {
	at := metav1.NewTime(time.Date(2026, 11, 30, 12, m, 0, 0, time.UTC))
	inc := v1alpha1.DriftIncident{Time: at, Object: "ConfigMap/shop/big", Origin: "shop/big.yaml",
		Action: v1alpha1.DriftReverted, Message: fmt.Sprintf("incident %d", m)}
	git, found := strings.Repeat("g", size), strings.Repeat(fmt.Sprint(m%10), size)
	for i := range n {
		inc.Fields = append(inc.Fields, v1alpha1.DriftField{Path: fmt.Sprintf("data.k%02d", i),
			Git: git, Found: found, Manager: "kubectl-edit", ChangedAt: &at})
	}
	return inc
}

func record(m int) v1alpha1.SyncRecord {
	return v1alpha1.SyncRecord{Revision: strings.Repeat("a", 40), StartedAt: metav1.NewTime(time.Date(2026, 11, 30, 12, m, 0, 0, time.UTC)),
		Duration: "1s", Result: v1alpha1.ResultSucceeded, Message: fmt.Sprintf("sync %d", m)}
}

// newestFirst builds a status with incidents and records at the given
// minutes (newest first) and a large inventory.
func newestFirst(incidents, records []int, fields, size int) *v1alpha1.SyncStatus {
	st := &v1alpha1.SyncStatus{}
	for _, m := range incidents {
		st.Drift = append(st.Drift, incident(m, fields, size))
	}
	for _, m := range records {
		st.History = append(st.History, record(m))
	}
	for i := range 10000 {
		st.Inventory = append(st.Inventory, v1alpha1.InventoryEntry{ID: fmt.Sprintf("shop_cm-%05d__ConfigMap", i), Version: "v1"})
	}
	return st
}

func minutes(from, to int) []int {
	var ms []int
	for m := from; m >= to; m-- {
		ms = append(ms, m)
	}
	return ms
}

func TestDriftStatusIsKeptUnderItsBudget(t *testing.T) {
	tests := []struct {
		name                  string
		st                    *v1alpha1.SyncStatus
		wantDrift, wantRecord []string // messages kept, newest first; nil: do not check
	}{
		{"small incidents are all kept",
			newestFirst(minutes(40, 21), minutes(59, 50), 1, 10),
			messages("incident", minutes(40, 21)), messages("sync", minutes(59, 50))},
		{"20 incidents of 20 large fields each lose the oldest incidents",
			newestFirst(minutes(40, 21), minutes(59, 50), 20, 64<<10),
			nil, messages("sync", minutes(59, 50))},
		{"records older than every incident go before incidents",
			newestFirst(minutes(40, 21), minutes(19, 10), 20, 64<<10),
			nil, []string{"sync 19"}},
		{"the newest incident is kept whatever its size",
			newestFirst([]int{40}, nil, 200, 64<<10),
			[]string{"incident 40"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inventory := len(tt.st.Inventory)
			FitStatus(tt.st, StatusBudget)
			if size := StatusSize(tt.st); size > StatusBudget && len(tt.st.Drift) > 1 {
				t.Errorf("status takes %d bytes without inventory, want at most %d", size, StatusBudget)
			}
			if len(tt.st.Inventory) != inventory {
				t.Errorf("inventory cut from %d to %d entries", inventory, len(tt.st.Inventory))
			}
			gotDrift := messagesOf(tt.st.Drift)
			if tt.wantDrift != nil && strings.Join(gotDrift, ",") != strings.Join(tt.wantDrift, ",") {
				t.Errorf("incidents kept %q, want %q", gotDrift, tt.wantDrift)
			}
			if tt.wantDrift == nil && (len(gotDrift) == 0 || gotDrift[0] != "incident 40" || len(gotDrift) == 20) {
				t.Errorf("incidents kept %q, want the newest ones, fewer than 20", gotDrift)
			}
			var gotRecord []string
			for _, r := range tt.st.History {
				gotRecord = append(gotRecord, r.Message)
			}
			if tt.wantRecord != nil && strings.Join(gotRecord, ",") != strings.Join(tt.wantRecord, ",") {
				t.Errorf("records kept %q, want %q", gotRecord, tt.wantRecord)
			}
			for _, inc := range tt.st.Drift {
				for _, f := range inc.Fields {
					if len(f.Git) > MaxValue || len(f.Found) > MaxValue {
						t.Fatalf("field %s kept %d and %d bytes, want at most %d", f.Path, len(f.Git), len(f.Found), MaxValue)
					}
				}
			}
		})
	}
}

func messages(prefix string, ms []int) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %d", prefix, m))
	}
	return out
}

func messagesOf(incs []v1alpha1.DriftIncident) []string {
	var out []string
	for _, inc := range incs {
		out = append(out, inc.Message)
	}
	return out
}
