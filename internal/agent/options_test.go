package agent

import "testing"

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
