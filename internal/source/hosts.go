package source

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Hosts is an allow-list of host patterns for the addresses a tenant's
// Sync may fetch from: git repositories, chart repositories and
// registries, remote Kustomize bases, and chart downloads an index points
// to. A pattern is a host name ("github.com"), matched exactly, or
// "*." and a domain ("*.corp.example"), which matches every host under
// that domain but not the domain itself. Case does not matter; ports and
// schemes are not part of a pattern. The zero value (no patterns) allows
// every host.
type Hosts struct {
	patterns []string
}

// ParseHosts reads patterns (as --tenant-source-hosts gives them); empty
// entries are skipped. The error names the pattern that is not one.
func ParseHosts(patterns []string) (Hosts, error) {
	var h Hosts
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		name := strings.TrimPrefix(p, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ ") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			return Hosts{}, fmt.Errorf("host pattern %q is not a host name or *.<domain>: write github.com or *.corp.example (no scheme, port or path)", p)
		}
		h.patterns = append(h.patterns, p)
	}
	return h, nil
}

// Restricts reports whether h allows only some hosts.
func (h Hosts) Restricts() bool { return len(h.patterns) > 0 }

// Allows reports whether host (with or without a port) matches one of the
// patterns, or h has none.
func (h Hosts) Allows(host string) bool {
	if !h.Restricts() {
		return true
	}
	if name, _, err := net.SplitHostPort(host); err == nil {
		host = name
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	for _, p := range h.patterns {
		if domain, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(host, "."+domain) {
				return true
			}
		} else if host == p {
			return true
		}
	}
	return false
}

// String lists the patterns, as the flag takes them.
func (h Hosts) String() string { return strings.Join(h.patterns, ",") }

// HostNotAllowedError is a fetch from a host that --tenant-source-hosts
// does not list.
type HostNotAllowedError struct {
	// What names the address, such as "spec.source.git.url" or "the
	// download URL of chart web 1.2.0".
	What string
	// Host is the host refused, without credentials.
	Host string
	// Hosts is the allow-list.
	Hosts Hosts
}

func (e *HostNotAllowedError) Error() string {
	name := e.Host
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h // a pattern has no port
	}
	return fmt.Sprintf("%s is on host %s, which a Sync outside the agent's namespace may not fetch from (the agent's --tenant-source-hosts allows %s): "+
		"use an address on an allowed host, or ask the cluster's administrator to add %s to --tenant-source-hosts", e.What, e.Host, e.Hosts, name)
}

// CheckHost returns a *HostNotAllowedError when h does not allow the host
// of raw, a repository address (URL or scp-like). A file:// address has no
// host and is not checked here (see --allow-file-urls). When h restricts,
// an address whose host cannot be read is refused too: what the check
// cannot read, the fetch must not be left to read otherwise.
func (h Hosts) CheckHost(what, raw string) error {
	if !h.Restricts() {
		return nil
	}
	protocol, err := Protocol(raw)
	if err == nil && protocol == ProtocolFile {
		return nil
	}
	host, ok := addressHost(raw)
	if err == nil && ok && h.Allows(host) {
		return nil
	}
	if !ok {
		host = "(none that can be read)"
	}
	return &HostNotAllowedError{What: what, Host: host, Hosts: h}
}

// CheckURL returns a *HostNotAllowedError when h does not allow the host
// of raw, a URL of any scheme (an API server, a proxy), or when h
// restricts and raw names no host that can be read. Unlike CheckHost it
// asks for no repository path.
func (h Hosts) CheckURL(what, raw string) error {
	if !h.Restricts() {
		return nil
	}
	host := "(none that can be read)"
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		if host = strings.ToLower(u.Host); h.Allows(host) {
			return nil
		}
	}
	return &HostNotAllowedError{What: what, Host: host, Hosts: h}
}

// addressHost returns the host of a URL or scp-like address, lowercased,
// with its port when it has one; ok is false when it names none.
func addressHost(raw string) (string, bool) {
	var host, port string
	if hasScheme.MatchString(raw) {
		u, err := url.Parse(raw)
		if err != nil {
			return "", false
		}
		host, port = u.Hostname(), u.Port()
	} else {
		m := scpLike.FindStringSubmatch(raw)
		if m == nil {
			return "", false
		}
		host, port = m[2], m[3]
	}
	if host == "" {
		return "", false
	}
	host = strings.ToLower(host)
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	if port != "" {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	return host, true
}
