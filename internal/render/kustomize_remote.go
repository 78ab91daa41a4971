package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// RemoteBase is a remote base or resource of git form that a
// kustomization names, such as
// https://example.com/org/repo//apps/base?ref=v1.2.
type RemoteBase struct {
	// Repo is the repository's address: https://, ssh://, file:// or an
	// scp-like git@host:org/repo.git.
	Repo string
	// Ref is the branch, tag or commit of ref= (or version=); empty for the
	// repository's default branch.
	Ref string
	// Path is the directory or file in the repository; empty for its root.
	Path string
}

// String is the base as Kustomize writes it.
func (b RemoteBase) String() string {
	s := b.Repo
	if b.Path != "" {
		s += "//" + b.Path
	}
	if b.Ref != "" {
		s += "?ref=" + b.Ref
	}
	return s
}

// RemoteTree is a read-only copy of a remote repository at one commit.
type RemoteTree struct {
	// Dir is the root of the repository's files.
	Dir string
	// Revision is the commit.
	Revision string
	// Release is called when the render is done with Dir; it may be nil.
	Release func()
}

// RemoteFetcher fetches the repositories of remote bases, for
// kustomizations of a Sync with spec.kustomize.allowRemote. Render itself
// talks to no network: the source layer fetches. The error says what went
// wrong without a credential; render names the kustomization and the base.
type RemoteFetcher interface {
	FetchRemote(base RemoteBase) (RemoteTree, error)
}

// remoteMountDir is where, in the names a build sees, remote trees are
// mounted: .driftless-remote/<n> holds the n-th repository fetched. The
// checkout's own files of that name, if any, are hidden from builds with
// remote bases.
const remoteMountDir = ".driftless-remote"

// mount is a remote tree, read through its own os.Root.
type mount struct {
	prefix string // .driftless-remote/<n>
	base   RemoteBase
	tree   RemoteTree
	root   *os.Root
	dir    string // tree.Dir, absolute and without symbolic links
}

// shown is how messages and origins name name, a name in mount m.
func (m *mount) shown(name string) string {
	inner := strings.TrimPrefix(strings.TrimPrefix(name, m.prefix), "/")
	b := m.base
	b.Path = inner
	return b.String()
}

// mountOf returns the mount name is in, and name relative to its root;
// nil and name for a name of the checkout.
func (r *renderer) mountOf(name string) (*mount, string) {
	if !strings.HasPrefix(name, remoteMountDir+"/") {
		return nil, name
	}
	for _, m := range r.mounts {
		if name == m.prefix {
			return m, "."
		}
		if rest, ok := strings.CutPrefix(name, m.prefix+"/"); ok {
			return m, rest
		}
	}
	return nil, name
}

// stat is os.Root.Stat of name, in the checkout or in a remote tree.
func (r *renderer) stat(name string) (fs.FileInfo, error) {
	if m, inner := r.mountOf(name); m != nil {
		return m.root.Stat(inner)
	}
	return r.root.Stat(name)
}

// open is fs.FS.Open of name, in the checkout or in a remote tree.
func (r *renderer) open(name string) (fs.File, error) {
	if m, inner := r.mountOf(name); m != nil {
		return m.root.Open(inner)
	}
	return r.fsys.Open(name)
}

// shownName is name as messages show it: a name in a remote tree as the
// remote base it is.
func (r *renderer) shownName(name string) string {
	if m, _ := r.mountOf(name); m != nil {
		return m.shown(name)
	}
	return name
}

// releaseMounts releases the remote trees of the render.
func (r *renderer) releaseMounts() {
	for _, m := range r.mounts {
		_ = m.root.Close()
		if m.tree.Release != nil {
			m.tree.Release()
		}
	}
	r.mounts = nil
}

// mountRemote fetches base, once per repository and ref in a render, and
// returns its mount.
func (r *renderer) mountRemote(base RemoteBase) (*mount, error) {
	for _, m := range r.mounts {
		if m.base.Repo == base.Repo && m.base.Ref == base.Ref {
			return m, nil
		}
	}
	tree, err := r.opts.Remote.FetchRemote(RemoteBase{Repo: base.Repo, Ref: base.Ref})
	if err != nil {
		return nil, err
	}
	m := &mount{prefix: remoteMountDir + "/" + strconv.Itoa(len(r.mounts)), base: RemoteBase{Repo: base.Repo, Ref: base.Ref}, tree: tree}
	if m.dir, err = filepath.EvalSymlinks(tree.Dir); err == nil {
		m.root, err = os.OpenRoot(m.dir)
	}
	if err != nil {
		if tree.Release != nil {
			tree.Release()
		}
		return nil, fmt.Errorf("the copy of %s cannot be opened: %w", redactEntry(base.Repo), err)
	}
	r.mounts = append(r.mounts, m)
	return m, nil
}

// remoteFields are the fields of kustomizations and of generator and
// transformer configurations that name files, bases or resources.
var remoteFields = map[string]bool{
	"resources": true, "bases": true, "components": true, "generators": true, "transformers": true,
	"validators": true, "crds": true, "configurations": true, "patchesStrategicMerge": true,
	"path": true, "paths": true, "files": true, "envs": true, "env": true, "targetFilePath": true,
}

// fetchedFields are the fields whose remote entries of git form are
// fetched when spec.kustomize.allowRemote is on.
var fetchedFields = map[string]bool{"resources": true, "bases": true, "components": true}

// remote refuses every remote value of a path-like field in v, a decoded
// kustomization or configuration, wherever it is; with allowRemote, except
// the top-level resources, bases and components of a kustomization
// (top), which base fetches.
func (c *refChecker) remote(file, key string, v any, top bool) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			c.remote(file, k, v[k], top && key == "")
		}
	case []any:
		for _, e := range v {
			c.remote(file, key, e, top)
		}
	case string:
		if !remoteFields[key] || isInline(v) {
			return
		}
		if key == "files" {
			if _, after, found := strings.Cut(v, "="); found {
				v = after
			}
		}
		if !isRemote(v) {
			return
		}
		switch {
		case !c.r.opts.Kustomize.AllowRemote:
			c.fail(file, fmt.Errorf("%s entry %q is remote; remote bases and resources are refused (spec.kustomize.allowRemote is off): copy what it names into the repository", key, redactEntry(v)))
		case !top || !fetchedFields[key]:
			c.fail(file, fmt.Errorf("%s entry %q is remote; driftless fetches remote bases of git form in resources and components only: copy what it names into the repository", key, redactEntry(v)))
		}
	}
}

// remoteBase checks a remote entry of resources or components of file,
// the kustomization of dir: it fetches the repository, checks the base
// in it like a base of the repository, and returns the path to give
// Kustomize instead of entry, relative to dir.
func (c *refChecker) remoteBase(dir, file, field, entry string, configs bool) (string, bool) {
	base, err := parseRemote(entry)
	if err != nil {
		c.fail(file, fmt.Errorf("%s entry %q: %w", field, redactEntry(entry), err))
		return "", false
	}
	if c.r.opts.Remote == nil {
		c.fail(file, fmt.Errorf("%s entry %q is remote, and remote bases are not fetched here: render it with the agent or with driftless build --allow-remote, or copy what it names into the repository", field, redactEntry(entry)))
		return "", false
	}
	if m, _ := c.r.mountOf(dir); m != nil {
		c.fail(c.r.shownName(file), fmt.Errorf("%s entry %q is remote, in a remote base; driftless fetches remote bases named by the repository's own kustomizations only", field, redactEntry(entry)))
		return "", false
	}
	m, err := c.r.mountRemote(base)
	if err != nil {
		c.fail(file, fmt.Errorf("%s entry %q cannot be fetched: %w", field, redactEntry(entry), err))
		return "", false
	}
	name := m.prefix
	if base.Path != "" {
		name = path.Join(m.prefix, base.Path)
		if !strings.HasPrefix(name, m.prefix+"/") {
			c.fail(file, fmt.Errorf("%s entry %q: path %q leads out of the repository", field, redactEntry(entry), base.Path))
			return "", false
		}
	}
	real, err := c.fsys.resolve(name)
	switch {
	case errors.Is(err, errOutside):
		c.fail(file, fmt.Errorf("%s entry %q: %w", field, redactEntry(entry), err))
		return "", false
	case errors.Is(err, fs.ErrNotExist):
		c.fail(file, fmt.Errorf("%s entry %q: path %q is not in %s at %s", field, redactEntry(entry), base.Path, redactEntry(base.Repo), shortRev(m.tree.Revision)))
		return "", false
	case err != nil:
		c.fail(file, fmt.Errorf("%s entry %q cannot be read: %w", field, redactEntry(entry), err))
		return "", false
	}
	info, err := c.r.stat(real)
	if err != nil {
		c.fail(file, fmt.Errorf("%s entry %q cannot be read: %w", field, redactEntry(entry), err))
		return "", false
	}
	c.remoteRead = true
	if info.IsDir() {
		files := c.r.kustomizationFilesIn(name)
		if len(files) == 0 {
			c.fail(file, fmt.Errorf("%s entry %q is a directory without a kustomization.yaml, kustomization.yml or Kustomization", field, redactEntry(entry)))
			return "", false
		}
		c.kustomization(name, files[0], configs && field == "resources")
	}
	rel := name
	if dir != "." {
		rel = strings.Repeat("../", strings.Count(dir, "/")+1) + name
	}
	return rel, true
}

func shortRev(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

// redactEntry removes a password or token written into a remote entry
// (everything between :// and the last @ of the host part, which may hold
// an @ of its own); the user name git, which SSH addresses carry, stays.
func redactEntry(s string) string {
	return userinfo.ReplaceAllStringFunc(s, func(m string) string {
		if m == "://git@" {
			return m
		}
		return "://***@"
	})
}

var userinfo = regexp.MustCompile(`://[^/\s]+@`)

// parseRemote reads a remote entry of git form as Kustomize does:
// REPO//PATH?ref=REF, where REPO is https://host/org/repo, ssh://…,
// file://… or git@host:org/repo.git; a REPO ending in .git may be
// followed by /PATH without the double slash. A URL of a single file
// fetched over plain HTTP(S) is refused.
func parseRemote(entry string) (RemoteBase, error) {
	s := strings.TrimPrefix(entry, "git::")
	var b RemoteBase
	if q := strings.Index(s, "?"); q >= 0 {
		query := s[q+1:]
		s = s[:q]
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ref", "version":
				b.Ref = v
			case "timeout", "submodules":
			default:
				return b, fmt.Errorf("query parameter %q is not one driftless knows; use ref=", k)
			}
		}
	}
	if strings.HasPrefix(strings.ToLower(s), "github.com/") || strings.HasPrefix(strings.ToLower(s), "github.com:") {
		s = "https://github.com/" + s[len("github.com/"):]
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	}
	switch {
	case strings.Contains(s[start:], "//"):
		i := start + strings.Index(s[start:], "//")
		b.Repo, b.Path = s[:i], s[i+2:]
	case strings.Contains(s, ".git/"):
		i := strings.Index(s, ".git/") + len(".git")
		b.Repo, b.Path = s[:i], s[i+1:]
	default:
		b.Repo = s
		if (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")) && isManifest(s) {
			return b, errors.New("is a file fetched over HTTP; driftless fetches remote bases from git repositories only (REPO//PATH?ref=REF): copy the file into the repository")
		}
	}
	b.Path = strings.Trim(b.Path, "/")
	if b.Repo == "" || strings.HasSuffix(b.Repo, "://") {
		return b, errors.New("names no repository; write it as https://<host>/<org>/<repo>//<path>?ref=<ref>")
	}
	return b, nil
}

// scpUser starts a git address such as git@github.com:org/repo.
var scpUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// isRemote reports whether Kustomize would fetch p rather than read it
// from disk: a URL, a git address, or github.com/org/repo.
func isRemote(p string) bool {
	l := strings.ToLower(p)
	return strings.Contains(p, "://") || strings.HasPrefix(l, "git::") ||
		strings.HasPrefix(l, "github.com/") || strings.HasPrefix(l, "github.com:") || scpUser.MatchString(p)
}

// showNames rewrites the names of remote trees in msg as the remote bases
// they are.
func (r *renderer) showNames(msg string) string {
	for _, m := range r.mounts {
		msg = strings.ReplaceAll(msg, m.prefix+"/", redactEntry(m.base.Repo)+"//")
		msg = strings.ReplaceAll(msg, m.prefix, redactEntry(m.base.Repo))
	}
	return msg
}

// rewriteEntries returns the kustomization data with the entries of its
// resources, bases and components replaced as rewrites say.
func rewriteEntries(data []byte, rewrites map[string]string) ([]byte, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	for field := range fetchedFields {
		list, _ := m[field].([]any)
		for i, e := range list {
			if s, ok := e.(string); ok {
				if to, ok := rewrites[s]; ok {
					list[i] = to
				}
			}
		}
	}
	return json.Marshal(m)
}
