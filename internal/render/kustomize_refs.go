package render

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// errOutside is wrapped by errors about paths that leave the repository.
var errOutside = errors.New("a kustomization may name files anywhere in the repository, but not outside it")

// references is what checkReferences found.
type references struct {
	ok bool // no problem: the kustomization may be built
	// stripOrigins: render asked Kustomize for origin annotations, which
	// the kustomization did not ask for.
	stripOrigins bool
	// schema: a kustomization sets an OpenAPI schema, which Kustomize
	// keeps for every later build unless it is reset.
	schema bool
	// inputs are the directories of every kustomization checked and every
	// file and directory they name: all that the build can read.
	inputs []string
	// remote: a remote base was fetched, so the build may differ with no
	// change to the repository.
	remote bool
}

// refChecker checks a kustomization and what it names.
type refChecker struct {
	r      *renderer
	fsys   *repoFS
	ok     bool
	schema bool            // a kustomization sets openapi
	seen   map[string]bool // kustomization directories checked
	named  map[string]bool // files and directories named, found in the repository
	// rewrites are, by kustomization file, the remote entries to give
	// Kustomize as paths to their fetched copies.
	rewrites   map[string]map[string]string
	remoteRead bool // a remote base was fetched
}

// checkReferences reads the kustomization k, and every kustomization it
// names as a base, component or directory of generators, and checks each
// path they name before Kustomize reads any of them. It refuses remote
// bases and resources (see KustomizeOptions), absolute paths, paths and
// symbolic links that lead out of the repository, Helm charts, and
// generators and transformers that are not Kustomize's builtin ones; and
// it reports files and directories that are not there. Each problem is an
// *Error at the kustomization or generator file that names the path.
//
// Kustomize fetches remote bases and resources without going through its
// filesystem, so this check is what keeps it off the network: it looks at
// every path-like field, wherever it is.
//
// It also asks Kustomize to record where each object came from, adding
// originAnnotations to the build metadata of k if k does not ask for them.
func (r *renderer) checkReferences(fsys *repoFS, k kustomization) references {
	c := &refChecker{r: r, fsys: fsys, ok: true, seen: map[string]bool{}, named: map[string]bool{}, rewrites: map[string]map[string]string{}}
	kz, data := c.kustomization(k.dir, k.file, false)
	refs := references{ok: c.ok, schema: c.schema, remote: c.remoteRead}
	for dir := range c.seen {
		refs.inputs = append(refs.inputs, dir)
	}
	for name := range c.named {
		refs.inputs = append(refs.inputs, name)
	}
	if refs.ok && kz != nil && !slices.Contains(kz.BuildMetadata, types.OriginAnnotations) {
		refs.stripOrigins = c.askForOrigins(k.file, data)
	}
	return refs
}

func (c *refChecker) fail(file string, err error) {
	c.ok = false
	if len(c.r.mounts) > 0 {
		file, err = c.r.shownName(file), errors.New(c.r.showNames(err.Error()))
	}
	// Two overlays of one base find the same problem in it: say it once.
	for _, e := range c.r.errs {
		if e.Origin.Path == file && e.Err.Error() == err.Error() {
			return
		}
	}
	c.r.fail(Origin{Path: file}, "", err)
}

// kustomization checks the kustomization file of dir and what it names.
// configs says that its resources are generator and transformer
// configurations. It returns the kustomization and its file's content, or
// nil if it could not read them.
func (c *refChecker) kustomization(dir, file string, configs bool) (*types.Kustomization, []byte) {
	if c.seen[dir] {
		return nil, nil
	}
	c.seen[dir] = true
	if files := c.r.kustomizationFilesIn(dir); len(files) > 1 {
		c.fail(file, fmt.Errorf("%s holds both %s and %s; Kustomize builds a directory from one, so keep one", shownDir(dir), path.Base(files[0]), path.Base(files[1])))
		return nil, nil
	}
	data, err := c.fsys.ReadFile(c.fsys.abs(file))
	if err != nil {
		c.fail(file, err)
		return nil, nil
	}
	var kz types.Kustomization
	if err := kz.Unmarshal(data); err != nil {
		c.fail(file, fmt.Errorf("not a valid kustomization: %s", strings.TrimPrefix(err.Error(), "invalid Kustomization: ")))
		return nil, nil
	}
	var raw map[string]any
	if yaml.Unmarshal(data, &raw) == nil {
		c.remote(file, "", raw, true)
	}
	kz.FixKustomization()
	c.schema = c.schema || len(kz.OpenAPI) > 0
	if len(kz.HelmCharts) > 0 || kz.HelmGlobals != nil {
		c.fail(file, errHelm("helmCharts"))
	}
	for _, e := range kz.Resources {
		c.base(dir, file, "resources", e, configs)
	}
	for _, e := range kz.Components {
		c.base(dir, file, "components", e, false)
	}
	for _, e := range kz.Generators {
		c.plugin(dir, file, "generators", e)
	}
	for _, e := range kz.Transformers {
		c.plugin(dir, file, "transformers", e)
	}
	for _, e := range kz.Validators {
		c.plugin(dir, file, "validators", e)
	}
	c.loads(dir, file, &kz)
	if rewrites := c.rewrites[file]; len(rewrites) > 0 {
		if out, err := rewriteEntries(data, rewrites); err == nil {
			c.fsys.replaced[file], data = out, out
		} else {
			c.fail(file, fmt.Errorf("remote bases cannot be given to Kustomize: %w", err))
		}
	}
	return &kz, data
}

// loads checks the files a kustomization loads.
func (c *refChecker) loads(dir, file string, kz *types.Kustomization) {
	load := func(field, entry string) { c.local(dir, file, field, entry) }
	for _, e := range kz.Crds {
		load("crds", e)
	}
	for _, e := range kz.Configurations {
		load("configurations", e)
	}
	// Deprecated fields, still built by krusty: their files are read too.
	//lint:ignore SA1019 kustomizations in the wild still use it
	for _, e := range kz.PatchesStrategicMerge {
		if !isInline(string(e)) {
			load("patchesStrategicMerge", string(e))
		}
	}
	for _, p := range kz.Patches {
		if p.Path != "" {
			load("patches", p.Path)
		}
	}
	//lint:ignore SA1019 kustomizations in the wild still use it
	for _, p := range kz.PatchesJson6902 {
		if p.Path != "" {
			load("patchesJson6902", p.Path)
		}
	}
	for _, p := range kz.Replacements {
		if p.Path != "" {
			load("replacements", p.Path)
		}
	}
	if p := kz.OpenAPI["path"]; p != "" {
		load("openapi", p)
	}
	for _, g := range kz.ConfigMapGenerator {
		c.kv(dir, file, "configMapGenerator", g.KvPairSources)
	}
	for _, g := range kz.SecretGenerator {
		c.kv(dir, file, "secretGenerator", g.KvPairSources)
	}
}

// kv checks the files of a ConfigMap or Secret generator.
func (c *refChecker) kv(dir, file, field string, kv types.KvPairSources) {
	for _, e := range kv.FileSources {
		_, p, found := strings.Cut(e, "=")
		if !found {
			p = e
		}
		c.local(dir, file, field+" files", p)
	}
	// FixKustomization moved env into envs.
	for _, e := range kv.EnvSources {
		c.envFile(dir, file, field, e)
	}
}

// envFile checks an env file of a generator. Kustomize would quote a line
// that is not UTF-8 in its error, and the line may be a Secret's value.
func (c *refChecker) envFile(dir, file, field, entry string) {
	name, isDir, ok := c.local(dir, file, field+" envs", entry)
	if !ok || isDir {
		return
	}
	data, err := c.fsys.ReadFile(c.fsys.abs(name))
	if err != nil {
		c.fail(file, err)
		return
	}
	if line := invalidUTF8(data); line > 0 {
		c.fail(file, fmt.Errorf("%s envs entry %q is not valid UTF-8 at line %d; save the file as UTF-8", field, entry, line))
	}
}

// base checks a resource or component: a file, or a directory with a
// kustomization, which it checks in turn.
func (c *refChecker) base(dir, file, field, entry string, configs bool) {
	if isRemote(entry) {
		if c.r.opts.Kustomize.AllowRemote {
			if rel, ok := c.remoteBase(dir, file, field, entry, configs); ok {
				if c.rewrites[file] == nil {
					c.rewrites[file] = map[string]string{}
				}
				c.rewrites[file][entry] = rel
			}
		}
		return
	}
	name, isDir, ok := c.local(dir, file, field, entry)
	switch {
	case !ok:
	case isDir:
		files := c.r.kustomizationFilesIn(name)
		if len(files) == 0 {
			c.fail(file, fmt.Errorf("%s entry %q is a directory without a kustomization.yaml, kustomization.yml or Kustomization; add one, or name its files", field, entry))
			return
		}
		c.kustomization(name, files[0], configs && field == "resources")
	case field == "components":
		c.fail(file, fmt.Errorf("components entry %q is a file; a component is a directory with a kustomization of kind Component", entry))
	case configs:
		c.configFile(dir, name)
	}
}

// plugin checks an entry of generators, transformers or validators:
// configurations inline, in a file, or in the resources of a
// kustomization.
func (c *refChecker) plugin(dir, file, field, entry string) {
	if isInline(entry) {
		c.configs(dir, file, []byte(entry))
		return
	}
	name, isDir, ok := c.local(dir, file, field, entry)
	switch {
	case !ok:
	case isDir:
		files := c.r.kustomizationFilesIn(name)
		if len(files) == 0 {
			c.fail(file, fmt.Errorf("%s entry %q is a directory without a kustomization.yaml, kustomization.yml or Kustomization; add one, or name its files", field, entry))
			return
		}
		c.kustomization(name, files[0], true)
	default:
		c.configFile(dir, name)
	}
}

// configFile checks the configurations in file, whose paths are relative
// to dir, the kustomization that loads them.
func (c *refChecker) configFile(dir, file string) {
	data, err := c.fsys.ReadFile(c.fsys.abs(file))
	if err != nil {
		c.fail(file, err)
		return
	}
	c.configs(dir, file, data)
}

// configs checks the generator and transformer configurations in data,
// the content of file or inline in it.
func (c *refChecker) configs(dir, file string, data []byte) {
	for _, doc := range splitYAML(data, math.MaxInt-1) {
		var obj map[string]any
		if yaml.Unmarshal(doc.data, &obj) != nil || obj == nil {
			continue // Kustomize says what is wrong with it
		}
		c.remote(file, "", obj, false)
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		switch {
		case kind == "HelmChartInflationGenerator":
			c.fail(file, errHelm(kind))
			continue
		case apiVersion != "builtin":
			c.fail(file, fmt.Errorf("%s of %s is not one of Kustomize's builtin generators and transformers (apiVersion: builtin); driftless runs no exec, container or Go plugin functions", kind, apiVersion))
			continue
		}
		for _, field := range []string{"path", "paths", "files", "envs", "env"} {
			for _, p := range stringsOf(obj[field]) {
				if field == "files" {
					if _, after, found := strings.Cut(p, "="); found {
						p = after
					}
				}
				if !isInline(p) {
					c.local(dir, file, field, p)
				}
			}
		}
		replacements, _ := obj["replacements"].([]any)
		for _, rep := range replacements {
			if m, ok := rep.(map[string]any); ok {
				if p, ok := m["path"].(string); ok && p != "" {
					c.local(dir, file, "replacements", p)
				}
			}
		}
	}
}

// local checks entry, a path that field of file names relative to dir,
// and returns its name in the checkout and whether it is a directory. A
// remote entry is not local; remote reports it.
func (c *refChecker) local(dir, file, field, entry string) (name string, isDir bool, ok bool) {
	if isRemote(entry) {
		return "", false, false
	}
	if filepath.IsAbs(entry) || path.IsAbs(entry) {
		c.fail(file, fmt.Errorf("%s entry %q is an absolute path; name it relative to %s", field, entry, shownDir(dir)))
		return "", false, false
	}
	name = path.Join(dir, filepath.ToSlash(entry))
	if !fs.ValidPath(name) {
		c.fail(file, fmt.Errorf("%s entry %q leads out of the repository, to %s; %w", field, entry, name, errOutside))
		return "", false, false
	}
	if m, _ := c.r.mountOf(dir); m != nil {
		if n, _ := c.r.mountOf(name); n != m {
			c.fail(file, fmt.Errorf("%s entry %q leads out of the remote repository %s", field, entry, redactEntry(m.base.Repo)))
			return "", false, false
		}
	} else if n, _ := c.r.mountOf(name); n != nil || name == remoteMountDir || strings.HasPrefix(name, remoteMountDir+"/") {
		c.fail(file, fmt.Errorf("%s entry %q names %s, a directory name driftless keeps for remote bases; rename it", field, entry, remoteMountDir))
		return "", false, false
	}
	real, err := c.fsys.resolve(name)
	switch {
	case errors.Is(err, errOutside):
		c.fail(file, fmt.Errorf("%s entry %q: %w", field, entry, err))
		return "", false, false
	case errors.Is(err, fs.ErrNotExist):
		c.fail(file, fmt.Errorf("%s entry %q not found: %s is not in the repository%s", field, entry, name, c.r.atRevision()))
		return "", false, false
	case err != nil:
		c.fail(file, fmt.Errorf("%s entry %q cannot be read: %w", field, entry, err))
		return "", false, false
	}
	info, err := c.r.stat(real)
	if err != nil {
		c.fail(file, fmt.Errorf("%s entry %q cannot be read: %w", field, entry, err))
		return "", false, false
	}
	c.named[name] = true
	return name, info.IsDir(), true
}

// isInline reports whether s is YAML content rather than a path, as
// Kustomize tells them apart: an inline patch or configuration is a
// mapping.
func isInline(s string) bool {
	var m map[string]any
	return strings.ContainsAny(s, ":\n") && yaml.Unmarshal([]byte(s), &m) == nil && m != nil
}

// stringsOf returns v if it is a string, or its strings if it is a list.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func errHelm(field string) error {
	return fmt.Errorf("%s: driftless does not inflate Helm charts inside Kustomize; remove it, and render the chart with a HelmChart document", field)
}

func shownDir(dir string) string {
	if dir == "." {
		return "the root of the repository"
	}
	return dir
}
