package agent

import (
	"strings"
	"testing"
)

func TestTrustedProxiesAreReadWithSpacesAroundThem(t *testing.T) {
	o := DefaultOptions()
	o.WebhookTrustedProxies = []string{"10.0.0.0/8", " fd00::/8"}
	got, err := o.check()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.trustedProxies) != 2 || got.trustedProxies[1].String() != "fd00::/8" {
		t.Errorf("trusted proxies = %v", got.trustedProxies)
	}
}

// --apply-concurrency below one is refused before the agent connects,
// naming the flag and its default.
func TestApplyConcurrencyBelowOneIsRefused(t *testing.T) {
	o := DefaultOptions()
	if err := o.Check(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	o.ApplyConcurrency = 0
	err := o.Check()
	if err == nil || !strings.Contains(err.Error(), "--apply-concurrency 0") || !strings.Contains(err.Error(), "default 64") {
		t.Errorf("error = %v, want one naming --apply-concurrency 0 and its default 64", err)
	}
}

// A negative --kube-api-burst is refused before the agent connects,
// saying what to write instead.
func TestNegativeKubeAPIBurstIsRefused(t *testing.T) {
	o := DefaultOptions()
	o.Burst = -1
	err := o.Check()
	if err == nil || !strings.Contains(err.Error(), "--kube-api-burst -1") || !strings.Contains(err.Error(), "write 0") {
		t.Errorf("error = %v, want one naming --kube-api-burst -1 and what to write", err)
	}
}
