package render

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/openapi"
)

// KustomizeOptions say what a kustomization may name.
//
// A kustomization may name files and directories anywhere in the
// repository, such as a base in ../base, and nothing outside it: not
// through a path, an absolute path or a symbolic link. Exec, container and
// Go plugin functions are not run, and Helm charts are not inflated
// (helmCharts): a kustomization that names one is refused.
type KustomizeOptions struct {
	// AllowRemote lets a kustomization name remote bases and resources:
	// URLs and git repositories. Render never fetches them, as it talks to
	// no network: without AllowRemote one is refused as not allowed, and
	// with it as not fetched yet.
	AllowRemote bool
}

// kustomizationFiles are the file names Kustomize builds a directory
// from, in the order it looks for them.
var kustomizationFiles = konfig.RecognizedKustomizationFileNames()

func isKustomizationFile(name string) bool {
	return slices.Contains(kustomizationFiles, path.Base(name))
}

// kustomizationIn returns the kustomization of dir if dir holds a
// kustomization file.
func (r *renderer) kustomizationIn(dir string) (kustomization, bool) {
	if files := r.kustomizationFilesIn(dir); len(files) > 0 {
		return kustomization{dir: dir, file: files[0]}, true
	}
	return kustomization{}, false
}

// kustomizationFilesIn returns the kustomization files dir holds; more than
// one is an error.
func (r *renderer) kustomizationFilesIn(dir string) []string {
	var files []string
	for _, name := range kustomizationFiles {
		file := path.Join(dir, name)
		if info, err := r.stat(file); err == nil && !info.IsDir() {
			files = append(files, file)
		}
	}
	return files
}

// kustomization is a directory built with Kustomize.
type kustomization struct {
	dir  string // "apps/prod", or "." for the root of the repository
	file string // its kustomization file, such as "apps/prod/kustomization.yaml"
}

func (k kustomization) path() string { return k.file }

// generate builds the kustomization and adds its objects. It first checks
// what the kustomization, its bases and components name (see
// checkReferences), so that nothing outside the repository is read and
// nothing remote is fetched.
func (k kustomization) generate(r *renderer) {
	r.readsBeyondPaths()
	fsys, err := r.repoFS()
	if err != nil {
		r.fail(Origin{Path: k.file}, "", err)
		return
	}
	refs := r.checkReferences(fsys, k)
	if !refs.ok {
		return
	}
	cache, options := r.opts.Cache, r.cacheOptions()
	if refs.remote {
		cache = nil // a remote base may change with no commit here
	}
	var digest [sha256.Size]byte
	if cache != nil {
		if digest, err = r.digestInputs(refs.inputs); err != nil {
			cache = nil // the build reports what cannot be read
		}
	}
	if cache != nil {
		if e, ok := cache.lookup(k.file, options, digest); ok {
			cache.reused.Add(1)
			r.reuse(k, e)
			return
		}
		cache.built.Add(1)
	}
	before, from, errs := r.used, len(r.pending), len(r.errs)
	m, err := build(fsys, k.dir, refs.schema)
	switch {
	case err != nil && fsys.refused != nil:
		// Kustomize wraps the error of the filesystem in its own words;
		// say what was refused, and why.
		r.failBuild(k, fsys.refused)
	case err != nil:
		r.fail(Origin{Path: k.file}, "", fmt.Errorf("kustomize build failed: %s", fsys.clean(err.Error())))
	default:
		r.addBuilt(k, m, refs.stripOrigins)
		if fsys.decrypted {
			r.markDecrypted(from)
		}
	}
	if cache != nil && !fsys.decrypted && !r.over && len(r.errs) == errs {
		objects := slices.Clone(r.pending[from:])
		cache.store(k.file, &cached{options: options, digest: digest, objects: objects, used: r.used.minus(before)})
	}
}

// kustomizeSchema guards the OpenAPI schema of kyaml (package openapi:
// kubernetesOpenAPIVersion, customSchema and globalSchema), the one piece
// of Kustomize's state that is global to the process. Every build reads it
// (strategic merge patches, whether a kind is namespaced), and a
// kustomization's openapi: field replaces it (krusty's SetSchema). Builds
// whose kustomizations set no schema only read it once it is parsed, so
// they share the lock and run in parallel; a build of a kustomization
// that sets one holds it alone, and puts the built-in schema back before
// it lets the others in, so that no later build of any Sync uses it; it
// starts from no schema, so that it sees only the one it sets.
var (
	kustomizeSchema sync.RWMutex
	builtinOnce     sync.Once
)

// useBuiltinSchema makes kyaml's schema the built-in Kubernetes one, and
// parses it now: a build that parses it lazily writes the schema's maps
// while a build running beside it reads them.
func useBuiltinSchema() {
	openapi.ResetOpenAPI()
	openapi.Schema()
}

// build runs Kustomize on dir with every plugin off, through fsys, which
// keeps it inside the repository. setsSchema says that one of the
// kustomizations it reads sets an OpenAPI schema (see kustomizeSchema).
func build(fsys *repoFS, dir string, setsSchema bool) (m resmap.ResMap, err error) {
	builtinOnce.Do(useBuiltinSchema)
	if setsSchema {
		kustomizeSchema.Lock()
		defer kustomizeSchema.Unlock()
		// Start from no schema, so that the build sees the one it sets
		// and nothing of the built-in one parsed before.
		openapi.ResetOpenAPI()
		defer useBuiltinSchema()
	} else {
		kustomizeSchema.RLock()
		defer kustomizeSchema.RUnlock()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("kustomize panicked: %v", p)
		}
	}()
	opts := &krusty.Options{
		Reorder: krusty.ReorderOptionNone,
		// fsys bounds reads by the repository; Kustomize's own
		// restriction would refuse bases in ../base.
		LoadRestrictions: types.LoadRestrictionsNone,
		PluginConfig:     types.DisabledPluginConfig(),
	}
	return krusty.MakeKustomizer(opts).Run(fsys, fsys.abs(dir))
}

// failBuild records err, an error of the filesystem, as the error of k.
func (r *renderer) failBuild(k kustomization, err error) {
	if errors.Is(err, ErrOverBudget) {
		r.stop(Origin{Path: k.file}, "", err)
		return
	}
	r.fail(Origin{Path: k.file}, "", err)
}

// addBuilt adds the objects of a build, each with the file it came from.
// stripOrigins removes Kustomize's origin annotation, which render asked
// for and the kustomization did not.
func (r *renderer) addBuilt(k kustomization, m resmap.ResMap, stripOrigins bool) {
	for _, res := range m.Resources() {
		if r.over {
			return
		}
		o := Origin{Path: k.file, From: k.file}
		data, err := res.MarshalJSON()
		if err != nil {
			r.fail(o, "", fmt.Errorf("kustomize built an object that cannot be read: %w", err))
			continue
		}
		v, err := decodeJSON(data)
		if err != nil {
			r.fail(o, "", fmt.Errorf("kustomize built an object that cannot be read: %w", err))
			continue
		}
		if obj, ok := v.(map[string]any); ok {
			o.From = cmp.Or(r.shownName(originOf(k.dir, obj, stripOrigins)), k.file)
		}
		if isHelmChart(v) {
			r.fail(o, "HelmChart", errors.New("the kustomization lists a HelmChart, which Kustomize cannot render; list the HelmChart's file or directory in the Sync's paths, beside the kustomization"))
			continue
		}
		if r.countDecoded(o, decodedSize(v)) {
			r.addValue(o, "object", v, nil)
		}
	}
}

// clean rewrites the absolute paths of the checkout in a message of
// Kustomize as paths relative to the repository.
func (f *repoFS) clean(msg string) string {
	for _, m := range f.r.mounts {
		msg = strings.ReplaceAll(msg, f.abs(m.prefix)+string(filepath.Separator), redactEntry(m.base.Repo)+"//")
	}
	msg = strings.ReplaceAll(msg, f.dir+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, f.dir, ".")
}
