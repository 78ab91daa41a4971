package render

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/origin"
)

// Origin says where in git an object came from (package origin owns
// its annotation format).
type Origin = origin.Origin

// Object is one desired object of a render, settled (see Render): held
// as its JSON, with what names it, what the plan reads of it and where it
// came from. Decode returns the object itself. An Object is a value: its
// JSON is shared by whoever holds a copy, and never changed.
type Object struct {
	// GVK, Namespace and Name name the object.
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	// Wave is the object's driftless.dev/wave annotation as written; ""
	// when it has none.
	Wave string
	// Needs are the objects it refers to, which must exist before it: its
	// Namespace, what a workload's pod template mounts or runs as, the
	// Service behind an APIService or an admission webhook (see needs).
	Needs []Ref
	// Defines is the kind a CustomResourceDefinition defines; zero for
	// any other object.
	Defines schema.GroupKind
	// JSON is the object.
	JSON []byte

	Origin Origin
	// SecretVariables names the variables read from a Secret that were
	// substituted into the object: its strings may hold Secret values.
	SecretVariables []string
	// Decrypted is set for an object that came from a file encrypted with
	// SOPS, or that a kustomization built which read one (Kustomize can
	// copy values between objects): any of its strings may hold a
	// decrypted value. Such an object is only ever held in memory.
	Decrypted bool
}

// A Ref names an object by kind, namespace and name, whatever its API
// version.
type Ref struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// Options say what to render. The zero value of every field but Root and
// Scope is a usable default.
type Options struct {
	// Root is the checkout directory. Nothing outside it is read, through
	// neither a path nor a symbolic link.
	Root string
	// Paths are directories or files relative to Root; empty means ".".
	Paths []string
	// Revision is the full git revision; the origin annotation and error
	// messages use its first 7 characters.
	Revision string
	// SyncLabel is the value of the driftless.dev/sync label, such as
	// "driftless-system.default". Empty means no label, for offline
	// rendering.
	SyncLabel string
	// SyncShard is the value of the driftless.dev/sync-shard label each
	// object gets (the Sync's driftless.dev/shard); empty: none.
	SyncShard string
	// TargetNamespace is the namespace of namespaced objects that name
	// none; empty means "default".
	TargetNamespace string
	// Scope tells which kinds the CustomResourceDefinitions in the render
	// do not define are namespaced. It is required.
	Scope ScopeResolver
	// Budgets bound what the render reads and holds; zero fields take
	// their value from DefaultBudgets.
	Budgets Budgets
	// Kustomize configures the build of kustomizations.
	Kustomize KustomizeOptions
	// Variables replace ${name} and ${name:=default} in the string values
	// of every object, after every generator, unless the object is
	// annotated driftless.dev/substitute: disabled. Nil means no
	// substitution at all: ${...} stay as they are.
	Variables map[string]Variable

	// KubeVersion is .Capabilities.KubeVersion in the templates of Helm
	// charts: the cluster's version, such as "v1.37.2". Empty means
	// DefaultKubeVersion, for rendering without a cluster.
	KubeVersion string
	// APIVersions is .Capabilities.APIVersions: every group/version the
	// cluster serves, and every group/version/kind, such as "apps/v1" and
	// "apps/v1/Deployment". Nil means those client-go knows.
	APIVersions []string
	// ValuesFrom reads the ConfigMaps and Secrets that HelmCharts take
	// values from (spec.valuesFrom). Nil, for rendering without a cluster,
	// makes a HelmChart with valuesFrom an error.
	ValuesFrom ValuesReader
	// Charts fetches the charts of HelmCharts that name a chart repository
	// or an OCI registry. Nil makes such a HelmChart an error.
	Charts ChartFetcher
	// Lookup answers lookup in the templates of HelmCharts with
	// spec.lookup. Nil, for rendering without a cluster, and for a
	// HelmChart without spec.lookup, lookup returns an empty map, as in
	// helm template.
	Lookup LookupFunc
	// ReadsBeyondPaths, when set, is called when a generator runs that
	// may read files outside Paths: a kustomization (its bases) or a
	// HelmChart (its chart and values files). A render without such a
	// call depends on the files under Paths only.
	ReadsBeyondPaths func()
	// Cache, when set, keeps what kustomizations built for the next
	// render of the same Sync, which builds again only those whose files
	// changed (see GeneratorCache).
	Cache *GeneratorCache
	// Remote fetches the remote bases of kustomizations (see
	// RemoteFetcher) when Kustomize.AllowRemote is on; nil refuses them
	// even then.
	Remote RemoteFetcher
	// Decrypt decrypts the files encrypted with SOPS that the render reads:
	// manifests, and every file a kustomization reads (resources,
	// generator inputs). Nil decrypts nothing: a render that reads an
	// encrypted file fails, naming it.
	Decrypt Decryptor
}

// Render reads every *.yaml, *.yml and *.json file under each of
// opts.Paths, recursively, skipping .git directories, and returns the
// objects the files define: in reading order (see below), and within a
// file in document order, with v1 Lists expanded into their items.
//
// A directory that holds a kustomization.yaml, kustomization.yml or
// Kustomization, whether a Paths entry or reached while walking one, is
// built with Kustomize instead, as `kustomize build` builds it, and its
// files are not read on their own; a Paths entry that names a
// kustomization file builds its directory. See KustomizeOptions for what
// a kustomization may name.
//
// Files are read Paths entry by entry, each directory depth-first with its
// entries in lexical order; a file or kustomization reached through two
// entries is read once. Documents are numbered as YAML numbers them: every "---" starts one,
// empty or not (empty ones yield no object), and a file starting with "---"
// starts with document 0. A .json file is one document.
//
// When opts.Variables is not nil, ${name} and ${name:=default} in the
// string values of every object are substituted first (see Variable),
// unless the object is annotated driftless.dev/substitute: disabled.
//
// Every object gets a namespace if its kind is namespaced and it names
// none; a cluster-scoped object loses the namespace it names, as with
// kubectl. Each gets the driftless.dev/sync label (unless opts.SyncLabel is
// empty) and the driftless.dev/origin annotation "<origin>@<revision>"
// (see Origin.String), which replace values the files set.
//
// Files must be UTF-8, and YAML and JSON are parsed strictly: a key set
// twice in one mapping is an error. Every object must have a
// metadata.name; metadata.generateName is refused, since driftless finds,
// updates and prunes objects by name.
//
// If anything is wrong with the files, Render returns no objects and the
// errors.Join of an *Error for every problem found, in reading order; see
// Errors. Other errors, such as a Root that cannot be opened, are returned
// alone and are not *Error.
//
// A render that exceeds one of opts.Budgets stops where it does: its
// errors are those found so far and one that wraps ErrOverBudget, says
// which budget and by how much, and names the agent flag that raises it.
// A document with YAML aliases is measured before they are expanded.
func Render(opts Options) ([]Object, error) {
	if opts.Scope == nil {
		return nil, errors.New("render options have no Scope")
	}
	root, err := os.OpenRoot(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("checkout cannot be opened: %w", err)
	}
	defer root.Close()

	r := &renderer{opts: opts, budgets: opts.Budgets.withDefaults(), root: root, fsys: root.FS(), order: map[string]int{}}
	defer r.releaseMounts()
	for i, g := range r.generators() {
		if r.over {
			break
		}
		r.order[g.path()] = i
		g.generate(r)
	}
	if !r.over {
		r.settle()
	}
	if opts.Cache != nil {
		opts.Cache.finish()
	}
	if len(r.errs) > 0 {
		return nil, r.joinedErrors()
	}
	return r.objects, nil
}

type renderer struct {
	opts    Options
	budgets Budgets
	root    *os.Root
	fsys    fs.FS
	order   map[string]int // file → place in reading order
	pending []pending      // objects read, to settle
	objects []Object       // objects settled
	errs    []*Error
	used    usage
	over    bool // a budget is exceeded: read nothing more
	// lookedUpSecret is set when the HelmChart being rendered looked up
	// a Secret: its objects are then masked like decrypted data.
	lookedUpSecret bool
	// checkoutDir is Options.Root, absolute and without symbolic links,
	// once a kustomization needs it.
	checkoutDir string
	read        map[string]bool // files kustomizations read, counted once
	decrypted   map[string]bool // files decrypted, by name
	mounts      []*mount        // remote trees fetched for kustomizations
}

func (r *renderer) fail(o Origin, object string, err error) {
	r.errs = append(r.errs, &Error{Origin: o, Object: object, Err: err})
}

type identity struct {
	gk              schema.GroupKind
	namespace, name string
}

// settle substitutes variables in every object, gives it its namespace,
// label and annotation, finds objects defined twice, and encodes it: one
// object decoded at a time, each dropped from r.pending once settled.
func (r *renderer) settle() {
	scopes := r.kindScopes()
	targetNamespace := cmp.Or(r.opts.TargetNamespace, "default")
	first := map[identity]Origin{}
	r.objects = make([]Object, 0, len(r.pending))
	for i, p := range r.pending {
		r.pending[i] = pending{}
		u, err := p.decode()
		if err != nil {
			r.fail(p.origin, p.ref, err)
			continue
		}
		var secrets []string
		if r.opts.Variables != nil && !substitutionDisabled(u) {
			// Named as in git: a substituted name could hold a value
			// from a Secret.
			secrets, err = substitute(u, r.opts.Variables)
			if err == nil && u.GetName() == "" {
				err = errors.New("metadata.name is empty after substitution; give the variable a value or the reference a default")
			}
			if err != nil {
				r.fail(p.origin, p.ref, err)
				continue
			}
		}
		namespaced, err := scopes.namespaced(u.GroupVersionKind())
		if err != nil {
			r.fail(p.origin, ref(u), err)
			continue
		}
		switch {
		case !namespaced:
			u.SetNamespace("")
		case u.GetNamespace() == "":
			u.SetNamespace(targetNamespace)
		}
		id := identity{u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName()}
		if prev, ok := first[id]; ok {
			r.fail(p.origin, ref(u), fmt.Errorf("defined twice: %s and %s; remove one", prev, p.origin))
			continue
		}
		first[id] = p.origin
		r.mark(u, p.origin)
		o, err := NewObject(u, p.origin)
		if err != nil {
			r.fail(p.origin, ref(u), err)
			continue
		}
		o.SecretVariables, o.Decrypted = secrets, p.decrypted
		r.objects = append(r.objects, o)
	}
	r.pending = nil
}

// mark sets the sync label (and sync-shard label) and the origin
// annotation.
func (r *renderer) mark(u *unstructured.Unstructured, o Origin) {
	if r.opts.SyncLabel != "" {
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1alpha1.SyncLabel] = r.opts.SyncLabel
		if r.opts.SyncShard != "" {
			labels[v1alpha1.SyncShardLabel] = r.opts.SyncShard
		}
		u.SetLabels(labels)
	}
	annotation := origin.Format(o, r.opts.Revision)
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.OriginAnnotation] = annotation
	u.SetAnnotations(annotations)
}

func (r *renderer) shortRevision() string {
	return r.opts.Revision[:min(7, len(r.opts.Revision))]
}

// joinedErrors joins r.errs in reading order: problems with Paths entries
// and directories first, then by file and document.
func (r *renderer) joinedErrors() error {
	place := func(e *Error) int {
		if i, ok := r.order[e.Origin.Path]; ok {
			return i
		}
		return -1
	}
	slices.SortStableFunc(r.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(place(a), place(b)), cmp.Compare(a.Origin.Doc, b.Origin.Doc))
	})
	errs := make([]error, len(r.errs))
	for i, e := range r.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}
