package plan

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/render"
)

// Entry is one object in an inventory: what a previous sync applied.
type Entry struct {
	ID ID
	// Version is the API version the object was applied with.
	Version string
	// Wave is the wave it was applied in.
	Wave int
}

// Step applies one desired object.
type Step struct {
	ID ID
	// Wave is the object's wave: its driftless.dev/wave annotation,
	// lowered to the wave of any object that needs it (see New).
	Wave int
	Rank Rank
	// Version is the API version the object is applied with.
	Version string
	// Object is the desired object, as JSON (Desired decodes it), and
	// where it came from.
	Object render.Object
}

// Plan is the ordered set of changes for one sync.
type Plan struct {
	// Apply holds the desired objects in apply order.
	Apply []Step
	// Prune holds the inventory entries no longer desired, in prune
	// (reverse apply) order. The apply package still checks each one's
	// owner label and opt-out annotation before deleting it.
	Prune []Entry
}

// New plans a sync of desired against the inventory of the previous sync.
// Desired objects must be unique by ID (render guarantees it); invalid
// wave annotations count as wave 0 (Validate reports them).
//
// Order: by wave, then by kind rank, then by namespace, group, kind and
// name — never by file. An object that another object of the same sync
// needs (a ConfigMap a Deployment mounts, the CRD of a custom resource,
// the Service behind a webhook) is moved up to the earliest wave that
// needs it, so it is always applied first.
func New(desired []render.Object, previous []Entry) Plan {
	var p Plan
	want := make(map[ID]int, len(desired))
	for _, obj := range desired {
		id := ObjectID(obj)
		w, _ := waveOf(obj)
		want[id] = len(p.Apply)
		p.Apply = append(p.Apply, Step{ID: id, Wave: w, Rank: RankOf(id), Version: obj.GVK.Version, Object: obj})
	}
	crds := crdIndex(desired)
	// needs[i] are the objects of the plan that step i refers to, found
	// once: the loop below runs until no wave changes.
	needs := make([][]int, len(p.Apply))
	for i, s := range p.Apply {
		for _, ref := range references(s.Object, crds) {
			if j, ok := want[ref]; ok && ref != s.ID {
				needs[i] = append(needs[i], j)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for i, s := range p.Apply {
			for _, j := range needs[i] {
				if p.Apply[j].Wave > s.Wave {
					p.Apply[j].Wave = s.Wave
					changed = true
				}
			}
		}
	}
	slices.SortStableFunc(p.Apply, func(a, b Step) int {
		if a.Wave != b.Wave {
			return a.Wave - b.Wave
		}
		return compare(a.ID, b.ID)
	})
	for _, e := range previous {
		if _, ok := want[e.ID]; !ok {
			p.Prune = append(p.Prune, e)
		}
	}
	slices.SortStableFunc(p.Prune, func(a, b Entry) int {
		if a.Wave != b.Wave {
			return b.Wave - a.Wave
		}
		return compare(b.ID, a.ID)
	})
	return p
}

// Waves returns the plan's apply steps grouped by wave, in order.
func (p Plan) Waves() [][]Step {
	var waves [][]Step
	for i := 0; i < len(p.Apply); {
		j := i + 1
		for j < len(p.Apply) && p.Apply[j].Wave == p.Apply[i].Wave {
			j++
		}
		waves = append(waves, p.Apply[i:j])
		i = j
	}
	return waves
}

// Validate reports objects whose driftless.dev/wave annotation is not an
// integer, and Inventory objects (the agent's record of what a Sync
// applied, which a Sync must not write over), naming the file.
func Validate(desired []render.Object) error {
	var errs []error
	for _, o := range desired {
		if _, err := waveOf(o); err != nil {
			errs = append(errs, err)
		}
		if o.GVK.Group == v1alpha1.GroupVersion.Group && o.GVK.Kind == "Inventory" {
			errs = append(errs, fmt.Errorf("%s (%s): an Inventory is the agent's record of what a Sync applied, written by the agent only; "+
				"remove it from git (the agent writes the Sync's own)", ObjectID(o), o.Origin))
		}
	}
	return errors.Join(errs...)
}

func waveOf(o render.Object) (int, error) {
	v := o.Wave
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	w, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s (%s): annotation %s: %q is not an integer; write a wave number such as \"1\"",
			ObjectID(o), o.Origin, v1alpha1.WaveAnnotation, v)
	}
	return w, nil
}

func compare(a, b ID) int {
	switch {
	case less(a, b):
		return -1
	case less(b, a):
		return 1
	}
	return 0
}

// Inventory is the inventory the plan leaves when it fully succeeds: every
// desired object.
func (p Plan) Inventory() []Entry {
	inv := make([]Entry, 0, len(p.Apply))
	for _, s := range p.Apply {
		inv = append(inv, Entry{ID: s.ID, Version: s.Version, Wave: s.Wave})
	}
	return inv
}

// ErrEmptyRender is returned by CheckEmpty when a plan would prune
// everything because nothing was rendered.
var ErrEmptyRender = errors.New("empty render")

// CheckEmpty refuses a plan that desires nothing but would prune a
// non-empty inventory, unless allowEmpty: an empty render is far more often
// a wrong path or a broken commit than an intent to delete everything.
func (p Plan) CheckEmpty(allowEmpty bool) error {
	if len(p.Apply) > 0 || len(p.Prune) == 0 || allowEmpty {
		return nil
	}
	return fmt.Errorf("%w: the paths rendered no objects, which would prune all %d objects of the last sync; nothing was deleted. "+
		"Check spec.paths, or set spec.allowEmpty: true to really delete them", ErrEmptyRender, len(p.Prune))
}
