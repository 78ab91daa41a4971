package source

import (
	"net/url"
	"path"
	"strings"
)

// RepositoryKey names the repository an address points to, whatever the
// form of the address, so that two addresses of one repository compare
// equal: the lower-cased host, with its port unless it is the scheme's
// default (ssh 22, https 443, http 80, git 9418), then the path,
// lower-cased, without leading or trailing "/" and without a trailing
// ".git". The scheme and the user are left out. So
// ssh://git@GitHub.com:22/Org/Fleet.git, git@github.com:org/fleet,
// https://token@github.com/org/fleet.git/ and https://github.com/org/fleet
// all have the key "github.com/org/fleet", while
// ssh://git@git.example.com:2222/org/fleet has "git.example.com:2222/org/fleet".
//
// Two addresses of one repository on different non-default ports (HTTPS
// on 3000, SSH on 2222) have different keys; push notices give every
// address of the repository, so one of them matches. A file:// URL or an
// absolute path has the key "file://" and the cleaned path, case kept. ok
// is false for an address that names no repository (see Protocol).
func RepositoryKey(raw string) (key string, ok bool) {
	protocol, err := Protocol(raw)
	if err != nil {
		return "", false
	}
	var host, port, p string
	switch {
	case protocol == ProtocolFile:
		p = raw
		if hasScheme.MatchString(raw) {
			u, err := url.Parse(raw)
			if err != nil {
				return "", false
			}
			p = u.Path
		}
		return "file://" + path.Clean("/"+p), true
	case hasScheme.MatchString(raw):
		u, err := url.Parse(raw)
		if err != nil {
			return "", false
		}
		host, port, p = u.Hostname(), u.Port(), u.Path
	default:
		m := scpLike.FindStringSubmatch(raw)
		host, port, p = m[2], m[3], m[4]
	}
	p = strings.ToLower(strings.Trim(path.Clean("/"+p), "/"))
	p = strings.TrimSuffix(p, ".git")
	p = strings.Trim(p, "/")
	if host == "" || p == "" {
		return "", false
	}
	host = strings.ToLower(host)
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	if port != "" && port != defaultPorts[protocol] {
		host += ":" + port
	}
	return host + "/" + p, true
}

// defaultPorts are the ports an address without one uses.
var defaultPorts = map[string]string{ProtocolSSH: "22", ProtocolHTTPS: "443", ProtocolHTTP: "80", ProtocolGit: "9418"}

// RefName is the full name of the git reference r follows —
// refs/heads/<branch> (refs/heads/master when none is set) or
// refs/tags/<tag> — or "" for a commit, which follows no reference.
func (r Ref) RefName() string {
	switch {
	case r.Commit != "":
		return ""
	case r.Tag != "":
		return "refs/tags/" + r.Tag
	}
	return "refs/heads/" + r.branch()
}
