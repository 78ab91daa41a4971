package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/internal/redact"
)

// After a Secret is rotated the live object still holds the old value;
// only the new one is known, so every string that holds the masked value
// in the desired object hides its live form too.
func TestARotatedSecretValueIsHiddenOnBothSides(t *testing.T) {
	desired := map[string]any{"data": map[string]any{
		"url":   "postgres://app:NEWPASS@db",
		"plain": "same",
	}, "list": []any{"x-NEWPASS"}}
	live := map[string]any{"data": map[string]any{
		"url":   "postgres://app:OLDPASS@db",
		"plain": "same",
	}, "list": []any{"x-OLDPASS"}}
	secrets := redact.New("NEWPASS")
	secrets.Value(live)
	secrets.Value(desired)
	maskLikeDesired(live, desired)
	want := map[string]any{"data": map[string]any{"url": maskedValue, "plain": "same"}, "list": []any{maskedValue}}
	if d := cmp.Diff(want, live); d != "" {
		t.Errorf("live side (-want +got):\n%s", d)
	}
	if got := desired["data"].(map[string]any)["url"]; got != "postgres://app:"+maskedValue+"@db" {
		t.Errorf("desired url = %v", got)
	}
}
