package plan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/driftless/driftless/internal/render"
)

// Entry is one object in an inventory: what a previous sync applied.
type Entry struct {
	ID ID
	// Version is the API version the object was applied with.
	Version string
}

// Step applies one desired object.
type Step struct {
	ID     ID
	Rank   Rank
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
// Desired objects must be unique by ID (render guarantees it).
func New(desired []render.Object, previous []Entry) Plan {
	var p Plan
	want := make(map[ID]bool, len(desired))
	for _, obj := range desired {
		id := IDOf(obj.Object)
		want[id] = true
		p.Apply = append(p.Apply, Step{ID: id, Rank: RankOf(id), Object: obj})
	}
	slices.SortStableFunc(p.Apply, func(a, b Step) int { return compare(a.ID, b.ID) })
	for _, e := range previous {
		if !want[e.ID] {
			p.Prune = append(p.Prune, e)
		}
	}
	slices.SortStableFunc(p.Prune, func(a, b Entry) int { return compare(b.ID, a.ID) })
	return p
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
		inv = append(inv, Entry{ID: s.ID, Version: s.Object.Object.GroupVersionKind().Version})
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
