package receiver

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestTheSenderBehindATrustedProxyIsTheRightmostUntrustedForwardedHop(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		xff     []string
		want    string
	}{
		{"without trusted proxies, the TCP peer, whatever the header says", nil, "10.1.2.3:4000", []string{"203.0.113.7"}, "10.1.2.3"},
		{"a peer that is not a trusted proxy is the sender, whatever the header says", proxies, "192.0.2.9:4000", []string{"203.0.113.7"}, "192.0.2.9"},
		{"a trusted proxy's forwarded client", proxies, "10.1.2.3:4000", []string{"203.0.113.7"}, "203.0.113.7"},
		{"addresses a client wrote before the proxy's are not believed", proxies, "10.1.2.3:4000", []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"a chain of trusted proxies is walked from the right", proxies, "10.1.2.3:4000", []string{"198.51.100.1, 203.0.113.7, 10.9.9.9"}, "203.0.113.7"},
		{"several headers are one list", proxies, "10.1.2.3:4000", []string{"198.51.100.1", "203.0.113.7, 10.9.9.9"}, "203.0.113.7"},
		{"IPv6", proxies, "[fd00::1]:4000", []string{"2001:db8::5"}, "2001:db8::5"},
		{"a trusted proxy without the header is the sender", proxies, "10.1.2.3:4000", nil, "10.1.2.3"},
		{"a hop that is not an address stops at the last trusted one", proxies, "10.1.2.3:4000", []string{"203.0.113.7, garbage, 10.9.9.9"}, "10.9.9.9"},
		{"only trusted hops: the leftmost", proxies, "10.1.2.3:4000", []string{"10.7.7.7, 10.9.9.9"}, "10.7.7.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Receiver{opts: Options{TrustedProxies: tt.trusted}}
			req := httptest.NewRequest(http.MethodPost, "/hooks/github", nil)
			req.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			if got := r.sender(req); got != tt.want {
				t.Errorf("sender = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSendersBehindATrustedProxyAreLimitedApart(t *testing.T) {
	f := newFixture(t, map[string]string{GitHub: "s3cret"}, func(o *Options) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	limits := DefaultLimits()
	flood := signed(GitHub, "guess", []byte("{}"), "")
	flood.remote = "10.1.2.3:4000"
	flood.headers["X-Forwarded-For"] = "192.0.2.1"
	for range limits.PerAddressBurst + 1 {
		f.do(flood)
	}
	if code, _ := f.do(flood); code != http.StatusTooManyRequests {
		t.Fatalf("the flooding sender: status %d, want 429", code)
	}
	good := signed(GitHub, "s3cret", readPayload(t, "github-push.json"), "")
	good.remote = "10.1.2.3:4000"
	good.headers["X-Forwarded-For"] = "192.0.2.2"
	if code, reply := f.do(good); code != http.StatusOK || len(reply.Woken) == 0 {
		t.Errorf("another sender through the same proxy: %d %+v, want 200 with Syncs woken", code, reply)
	}
}

// FuzzSender feeds any X-Forwarded-For to a receiver behind a trusted
// proxy: nothing may panic, and the sender is the proxy or an address the
// header names.
func FuzzSender(f *testing.F) {
	f.Add("203.0.113.7")
	f.Add("198.51.100.1, 203.0.113.7, 10.9.9.9")
	f.Add(" , ,,::ffff:10.0.0.1,fe80::1%eth0")
	r := &Receiver{opts: Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	f.Fuzz(func(t *testing.T, xff string) {
		req := httptest.NewRequest(http.MethodPost, "/hooks/github", nil)
		req.RemoteAddr = "10.1.2.3:4000"
		req.Header.Set("X-Forwarded-For", xff)
		got := r.sender(req)
		if got != "10.1.2.3" {
			if _, err := netip.ParseAddr(got); err != nil {
				t.Errorf("sender %q is neither the proxy nor an address", got)
			}
		}
	})
}
