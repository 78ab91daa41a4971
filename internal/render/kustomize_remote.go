package render

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// remoteFields are the fields of kustomizations and of generator and
// transformer configurations that name files, bases or resources.
var remoteFields = map[string]bool{
	"resources": true, "bases": true, "components": true, "generators": true, "transformers": true,
	"validators": true, "crds": true, "configurations": true, "patchesStrategicMerge": true,
	"path": true, "paths": true, "files": true, "envs": true, "env": true, "targetFilePath": true,
}

// remote refuses every remote value of a path-like field in v, a decoded
// kustomization or configuration, wherever it is.
func (c *refChecker) remote(file, key string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			c.remote(file, k, v[k])
		}
	case []any:
		for _, e := range v {
			c.remote(file, key, e)
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
		if c.r.opts.Kustomize.AllowRemote {
			c.fail(file, fmt.Errorf("%s entry %q is remote; spec.kustomize.allowRemote is on, but driftless does not fetch remote bases and resources yet: copy what it names into the repository", key, v))
		} else {
			c.fail(file, fmt.Errorf("%s entry %q is remote; remote bases and resources are refused (spec.kustomize.allowRemote is off): copy what it names into the repository", key, v))
		}
	}
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
