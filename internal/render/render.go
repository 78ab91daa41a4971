package render

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Origin says where in git an object came from.
type Origin struct {
	Path string // slash-separated path relative to the checkout root, e.g. "workloads/app.yaml"
	Doc  int    // 0-based index of the YAML document within the file
	Line int    // 1-based line where that document starts in the file
}

// String reads "workloads/app.yaml#0": the path and the document index.
func (o Origin) String() string { return o.Path + "#" + strconv.Itoa(o.Doc) }

// Object is one desired object and where it came from.
type Object struct {
	Object *unstructured.Unstructured
	Origin Origin
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
	// TargetNamespace is the namespace of namespaced objects that name
	// none; empty means "default".
	TargetNamespace string
	// Scope tells which kinds the CustomResourceDefinitions in the render
	// do not define are namespaced. It is required.
	Scope ScopeResolver
	// Budgets bound what the render reads and holds; zero fields take
	// their value from DefaultBudgets.
	Budgets Budgets
}

// Render reads every *.yaml, *.yml and *.json file under each of
// opts.Paths, recursively, skipping .git directories, and returns the
// objects the files define: in reading order (see below), and within a
// file in document order, with v1 Lists expanded into their items.
//
// Files are read Paths entry by entry, each directory depth-first with its
// entries in lexical order; a file reached through two entries is read
// once. Documents are numbered as YAML numbers them: every "---" starts one,
// empty or not (empty ones yield no object), and a file starting with "---"
// starts with document 0. A .json file is one document.
//
// Every object gets a namespace if its kind is namespaced and it names
// none; a cluster-scoped object loses the namespace it names, as with
// kubectl. Each gets the driftless.dev/sync label (unless opts.SyncLabel is
// empty) and the driftless.dev/origin annotation "<path>#<doc>@<revision>",
// which replace values the files set.
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

	r := &renderer{opts: opts, budgets: opts.Budgets.withDefaults(), fsys: root.FS(), order: map[string]int{}}
	for i, name := range r.manifestFiles() {
		if r.over {
			break
		}
		r.order[name] = i
		r.addFile(name)
	}
	if !r.over {
		r.settle()
	}
	if len(r.errs) > 0 {
		return nil, r.joinedErrors()
	}
	return r.objects, nil
}

type renderer struct {
	opts    Options
	budgets Budgets
	fsys    fs.FS
	order   map[string]int // file → place in reading order
	objects []Object
	errs    []*Error
	used    usage
	over    bool // a budget is exceeded: read nothing more
}

func (r *renderer) fail(o Origin, object string, err error) {
	r.errs = append(r.errs, &Error{Origin: o, Object: object, Err: err})
}

// addFile reads one file and adds its objects.
func (r *renderer) addFile(name string) {
	data, err := r.readFile(name)
	switch {
	case errors.Is(err, ErrOverBudget):
		r.stop(Origin{Path: name}, "", err)
		return
	case err != nil:
		r.fail(Origin{Path: name}, "", err)
		return
	}
	if line := invalidUTF8(data); line > 0 {
		r.fail(Origin{Path: name}, "", fmt.Errorf("not valid UTF-8 at line %d; save the file as UTF-8", line))
		return
	}
	if path.Ext(name) == ".json" {
		o := Origin{Path: name, Doc: 0, Line: 1}
		if !r.countDocument(o) {
			return
		}
		v, err := decodeJSON(data)
		switch {
		case err != nil:
			r.fail(o, "", err)
		case v != nil && r.countDecoded(o, decodedSize(v)):
			r.addValue(o, "document", v)
		}
		return
	}
	for _, doc := range splitYAML(data, r.documentsLeft()) {
		o := Origin{Path: name, Doc: doc.index, Line: doc.line}
		if !r.countDocument(o) {
			return
		}
		if mayAlias(doc.data) {
			// Expanding aliases can take any amount of memory: measure first.
			size, err := expandedSize(doc, r.decodedLeft())
			if err != nil {
				r.fail(o, "", err)
				continue
			}
			if size > r.decodedLeft() {
				r.aliasesOverBudget(o)
				return
			}
		}
		v, err := decodeYAML(doc)
		switch {
		case err != nil:
			r.fail(o, "", err)
		case v != nil && r.countDecoded(o, decodedSize(v)):
			r.addValue(o, "document", v)
		}
		if r.over {
			return
		}
	}
}

type identity struct {
	gk              schema.GroupKind
	namespace, name string
}

// settle gives every object its namespace, label and annotation, and finds
// objects defined twice.
func (r *renderer) settle() {
	scopes := r.kindScopes()
	targetNamespace := cmp.Or(r.opts.TargetNamespace, "default")
	first := map[identity]Origin{}
	for _, o := range r.objects {
		u := o.Object
		namespaced, err := scopes.namespaced(u.GroupVersionKind())
		if err != nil {
			r.fail(o.Origin, ref(u), err)
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
			r.fail(o.Origin, ref(u), fmt.Errorf("defined twice: %s and %s; remove one", prev, o.Origin))
		} else {
			first[id] = o.Origin
		}
		r.mark(u, o.Origin)
	}
}

// mark sets the sync label and the origin annotation.
func (r *renderer) mark(u *unstructured.Unstructured, o Origin) {
	if r.opts.SyncLabel != "" {
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1alpha1.SyncLabel] = r.opts.SyncLabel
		u.SetLabels(labels)
	}
	origin := o.String()
	if rev := r.shortRevision(); rev != "" {
		origin += "@" + rev
	}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.OriginAnnotation] = origin
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
