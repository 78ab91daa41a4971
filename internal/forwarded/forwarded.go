package forwarded

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParsePrefixes parses CIDRs such as 10.0.0.0/8 or fd00::/8, as the flag
// named flag lists them; the error names the entry and the flag.
func ParsePrefixes(flag string, list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range list {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%s %q: write CIDRs such as 10.0.0.0/8,fd00::/8: %w", flag, p, err)
		}
		out = append(out, prefix)
	}
	return out, nil
}

// Sender is the address req came from, without its port: the TCP peer,
// or, when the peer is in trusted, the rightmost X-Forwarded-For hop that
// is not (each trusted proxy appends the address it was sent from, so the
// hops a client wrote itself lie to the left of it). A hop that is not
// an IP address ends the walk at the last trusted hop.
func Sender(req *http.Request, trusted []netip.Prefix) string {
	peer, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		peer = req.RemoteAddr
	}
	if len(trusted) == 0 {
		return peer
	}
	ip, err := netip.ParseAddr(peer)
	if err != nil || !contains(trusted, ip) {
		return peer
	}
	key := ip.String()
	hops := strings.Split(strings.Join(req.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return key
		}
		key = hop.Unmap().String()
		if !contains(trusted, hop) {
			return key
		}
	}
	return key
}

func contains(prefixes []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
