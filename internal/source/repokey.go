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
	if protocol, err := Protocol(raw); err == nil && protocol == ProtocolFile {
		p := raw
		if hasScheme.MatchString(raw) {
			u, err := url.Parse(raw)
			if err != nil {
				return "", false
			}
			p = u.Path
		}
		return "file://" + path.Clean("/"+p), true
	}
	host, p, ok := RepositoryAddress(raw)
	if !ok {
		return "", false
	}
	return host + "/" + strings.ToLower(p), true
}

// RepositoryAddress splits a network address of a repository into the
// host of RepositoryKey (lower-cased, with its port unless the scheme's
// default) and the path with its case kept, without leading or trailing
// "/" and without a trailing ".git": git@github.com:Org/Fleet.git gives
// "github.com" and "Org/Fleet". The user (which may be a token) is left
// out. ok is false for a file:// URL or an address that names no
// repository.
func RepositoryAddress(raw string) (host, repoPath string, ok bool) {
	protocol, err := Protocol(raw)
	if err != nil || protocol == ProtocolFile {
		return "", "", false
	}
	var port, p string
	if hasScheme.MatchString(raw) {
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", false
		}
		host, port, p = u.Hostname(), u.Port(), u.Path
	} else {
		m := scpLike.FindStringSubmatch(raw)
		if m == nil {
			return "", "", false
		}
		host, port, p = m[2], m[3], m[4]
	}
	p = strings.Trim(path.Clean("/"+p), "/")
	if strings.HasSuffix(strings.ToLower(p), ".git") {
		p = p[:len(p)-len(".git")]
	}
	p = strings.Trim(p, "/")
	if host == "" || p == "" {
		return "", "", false
	}
	host = strings.ToLower(host)
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	if port != "" && port != defaultPorts[protocol] {
		host += ":" + port
	}
	return host, p, true
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
