package controller

import (
	"bytes"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/drift"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/redact"
	"github.com/driftless/driftless/internal/render"
)

// Store is what the Sync and drift reconcilers share about each Sync, by
// its namespace and name (client.ObjectKey): its last render, the desired object of each object it
// applied, when it last compared every object, the writer of its drift
// incidents, and the gate that keeps a drift check from acting while a
// sync writes.
//
// The gate is what makes a revert safe: a sync holds it from its first
// request to its last — validation, apply and prune, not while it waits
// for health — and records what it wrote before letting go; a drift check
// holds it shared while it reads the desired object and re-applies it. So a drift check never reverts an
// object to a render older than what the running sync wrote, and never
// re-creates an object the sync has just pruned.
//
// It also holds what the agent's own writes returned (Writes), so that
// the watches tell them from anyone else's, and, per Sync, the objects a
// drift check saw changed but could not act on (MarkToCheck): the next
// sync compares those with the cluster whatever it would otherwise skip.
type Store struct {
	mu    sync.Mutex
	syncs map[client.ObjectKey]*syncState
	// writes is the resourceVersion each of the agent's writes returned.
	writes *drift.Writes
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{syncs: map[client.ObjectKey]*syncState{}, writes: drift.NewWrites()}
}

// Writes returns the record of the agent's own writes, shared by every
// Sync: the sync's applies, the drift reverts and the watches read it.
func (s *Store) Writes() *drift.Writes { return s.writes }

type syncState struct {
	// gate is held exclusively by a sync while it writes, shared by drift
	// checks.
	gate sync.RWMutex
	// applied holds, for each object the Sync manages, the desired form
	// last written (or found equal): what a drift check reverts to.
	// Guarded by gate.
	applied map[plan.ID]render.Object
	// appliedUID is the Sync's UID that applied belongs to. Guarded by gate.
	appliedUID types.UID
	// secrets are the Secret-derived values of the last render a sync
	// recorded, which drift checks mask their messages with. Guarded by
	// gate.
	secrets *redact.Set

	// Guarded by Store.mu:
	rendered rendered
	lastFull time.Time
	builds   *render.GeneratorCache
	// incidents writes the Sync's drift incidents (DriftReconciler).
	incidents *incidentWriter
	// inventory is what the Sync's Inventory lists, as this agent last
	// read or wrote it, for the Sync of UID inventoryUID; nil when not
	// known.
	inventory    []plan.Entry
	inventoryUID types.UID
	// digests is what the Inventory's digests say of its entries, as
	// this agent last read or wrote them.
	digests inventory.Digests
	// toCheck holds the objects a drift check saw changed and could not
	// act on (the Sync suspended or reporting only, a sync writing, no
	// sync yet in this process, a failed incident write): a sync compares
	// them with the cluster whatever it would otherwise skip. Bounded by
	// the Sync's objects.
	toCheck map[plan.ID]bool
	// compareAll: the Sync was seen suspended or reporting only since its
	// last full comparison, so the next sync that writes compares every
	// object (as after a start).
	compareAll bool
}

// RenderKey is what a cached render was made from: the Sync (its UID and
// generation), the revision, the Sync's variables and what the render
// read.
type RenderKey struct {
	UID        types.UID
	Revision   string
	Generation int64
	// Variables is the digest of the Sync's variables and decryption keys
	// (engine.VariablesDigest, secrets.Keys.Digest).
	Variables string
	// Inputs is the digest of the Sync's paths at Revision when the render
	// read nothing else (plain manifests only), else "".
	Inputs string
}

// sameRender reports whether a render made for k is the render for want:
// the same Sync, revision, generation and variables.
func (k RenderKey) sameRender(want RenderKey) bool {
	return k.UID == want.UID && k.Revision == want.Revision && k.Generation == want.Generation && k.Variables == want.Variables
}

// sameInputs reports whether a render made for k read what a render for
// want would read, at whatever revision: the same Sync, generation,
// variables and known inputs.
func (k RenderKey) sameInputs(want RenderKey) bool {
	return want.Inputs != "" && k.UID == want.UID && k.Inputs == want.Inputs && k.Generation == want.Generation && k.Variables == want.Variables
}

// rendered is a cached render, valid while its key's revision, the Sync's
// generation and its variables (engine.VariablesDigest) are unchanged.
type rendered struct {
	key     RenderKey
	objects []render.Object
}

func (s *Store) state(key client.ObjectKey) *syncState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok {
		st = &syncState{}
		s.syncs[key] = st
	}
	return st
}

// Rendered returns the cached render of key when it was made for want:
// the same Sync, revision, generation and variables (want.Inputs is not
// compared): shared, not to be changed.
func (s *Store) Rendered(key client.ObjectKey, want RenderKey) ([]render.Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok {
		return nil, false
	}
	r := st.rendered
	if !r.key.sameRender(want) || r.objects == nil {
		return nil, false
	}
	return r.objects, true
}

// HasRendered reports whether Rendered would find a render.
func (s *Store) HasRendered(key client.ObjectKey, want RenderKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok {
		return false
	}
	r := st.rendered
	return r.key.sameRender(want) && r.objects != nil
}

// RenderedInputs returns the cached render of key if it was made from
// want.Inputs (see SetRendered) by the same Sync, generation and
// variables, at any revision: a commit that left the Sync's paths as they
// were. Shared, not to be changed.
func (s *Store) RenderedInputs(key client.ObjectKey, want RenderKey) ([]render.Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok {
		return nil, false
	}
	r := st.rendered
	if !r.key.sameInputs(want) || r.objects == nil {
		return nil, false
	}
	return r.objects, true
}

// Inputs returns the digest of the paths that the cached render of key
// was made from (see SetRendered), when it was made by the Sync uid at
// generation and read nothing but its paths.
func (s *Store) Inputs(key client.ObjectKey, uid types.UID, generation int64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok {
		return "", false
	}
	r := st.rendered
	if r.key.UID != uid || r.key.Generation != generation || r.key.Inputs == "" || r.objects == nil {
		return "", false
	}
	return r.key.Inputs, true
}

// SetRendered caches a render of key made for made: objects themselves,
// whose JSON the caller and the cache then share. made.Inputs is the
// digest of everything the render read, "" when that is not known;
// made.Revision is "" when the render read something besides git (it is
// then never found by Rendered).
func (s *Store) SetRendered(key client.ObjectKey, made RenderKey, objects []render.Object) {
	st := s.state(key)
	s.mu.Lock()
	st.rendered = rendered{key: made, objects: objects}
	s.mu.Unlock()
}

// renderedObjects returns st's cached render.
func (s *Store) renderedObjects(st *syncState) []render.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.rendered.objects
}

// GeneratorCache returns the cache of what key's kustomizations built,
// kept from one render of the Sync to the next (see render.GeneratorCache).
func (s *Store) GeneratorCache(key client.ObjectKey) *render.GeneratorCache {
	st := s.state(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.builds == nil {
		st.builds = render.NewGeneratorCache()
	}
	return st.builds
}

// LastFull returns when key last compared every object with the cluster.
func (s *Store) LastFull(key client.ObjectKey) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok || st.lastFull.IsZero() {
		return time.Time{}, false
	}
	return st.lastFull, true
}

// SetLastFull records that key compared every object at t, which
// settles CompareAll.
func (s *Store) SetLastFull(key client.ObjectKey, t time.Time) {
	st := s.state(key)
	s.mu.Lock()
	st.lastFull, st.compareAll = t, false
	s.mu.Unlock()
}

// SetCompareAll records that key was seen unable to write (suspended, a
// dry run, selfHeal off): the next sync that writes compares every
// object with the cluster.
func (s *Store) SetCompareAll(key client.ObjectKey) {
	st := s.state(key)
	s.mu.Lock()
	st.compareAll = true
	s.mu.Unlock()
}

// CompareAll reports whether key's next sync must compare every object
// (SetCompareAll, until SetLastFull).
func (s *Store) CompareAll(key client.ObjectKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	return ok && st.compareAll
}

// MarkToCheck records that a drift check saw key's object id changed and
// could not act on it: the next sync of key compares it with the cluster.
func (s *Store) MarkToCheck(key client.ObjectKey, id plan.ID) {
	st := s.state(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.toCheck == nil {
		st.toCheck = map[plan.ID]bool{}
	}
	st.toCheck[id] = true
}

// ToCheck returns a copy of the objects of key marked to check.
func (s *Store) ToCheck(key client.ObjectKey) map[plan.ID]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok || len(st.toCheck) == 0 {
		return nil
	}
	out := make(map[plan.ID]bool, len(st.toCheck))
	for id := range st.toCheck {
		out[id] = true
	}
	return out
}

// Checked drops ids from the objects of key to check: they were compared
// with the cluster (by a sync that wrote, or a drift check that could act).
func (s *Store) Checked(key client.ObjectKey, ids ...plan.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.syncs[key]
	if !ok {
		return
	}
	for _, id := range ids {
		delete(st.toCheck, id)
	}
}

// incidentWriter returns the one writer of key's drift incidents. Forget
// drops it with the rest of what the Store holds about key.
func (s *Store) incidentWriter(key client.ObjectKey) *incidentWriter {
	st := s.state(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.incidents == nil {
		st.incidents = &incidentWriter{}
	}
	return st.incidents
}

// Inventory returns what the Inventory of key (the Sync uid) lists, as
// SetInventory last recorded it.
func (s *Store) Inventory(key client.ObjectKey, uid types.UID) ([]plan.Entry, bool) {
	st := s.state(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.inventory == nil || st.inventoryUID != uid {
		return nil, false
	}
	return st.inventory, true
}

// SetInventory records what the Inventory of key (the Sync uid) lists
// and what its digests say, once read or written. Neither may change
// afterwards.
func (s *Store) SetInventory(key client.ObjectKey, uid types.UID, entries []plan.Entry, digests inventory.Digests) {
	st := s.state(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if entries == nil {
		entries = []plan.Entry{}
	}
	st.inventory, st.inventoryUID, st.digests = entries, uid, digests
}

// Digests returns what the digests of key's Inventory (the Sync uid)
// say, as SetInventory last recorded them; nil when not known.
func (s *Store) Digests(key client.ObjectKey, uid types.UID) inventory.Digests {
	st := s.state(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.inventory == nil || st.inventoryUID != uid {
		return nil
	}
	return st.digests
}

// Forget drops everything about key (its Sync is gone).
func (s *Store) Forget(key client.ObjectKey) {
	s.mu.Lock()
	delete(s.syncs, key)
	s.mu.Unlock()
}

// Writer is a sync's hold on the gate of one Sync; see Store.
type Writer struct {
	st    *syncState
	uid   types.UID
	store *Store
}

// BeginWrite waits for running drift checks of key to finish and keeps
// new ones out until Release. The caller (one sync of the Sync uid at a
// time: the workqueue sees to that) records what it writes with Record
// and Replace before it releases.
func (s *Store) BeginWrite(key client.ObjectKey, uid types.UID) *Writer {
	st := s.state(key)
	st.gate.Lock()
	if st.appliedUID != uid {
		st.applied, st.appliedUID = nil, uid
	}
	return &Writer{st: st, uid: uid, store: s}
}

// SetSecrets sets the Secret-derived values of the render being written
// (engine.Redactor), which drift checks hide from what they report.
func (w *Writer) SetSecrets(set *redact.Set) { w.st.secrets = set }

// Release lets drift checks run again.
func (w *Writer) Release() { w.st.gate.Unlock() }

// Pause lets drift checks run while the sync waits (for health), and
// takes the gate back when wait returns. What was recorded so far is what
// they revert to.
func (w *Writer) Pause(wait func() error) error {
	w.st.gate.Unlock()
	defer w.st.gate.Lock()
	return wait()
}

// Record notes what a sync did to each object of cs: an object applied,
// found equal or skipped is reverted to its form in objects (the render,
// by ID) from now on; a pruned one is not reverted at all.
func (w *Writer) Record(cs apply.ChangeSet, objects map[plan.ID]render.Object) {
	if w.st.applied == nil {
		w.st.applied = make(map[plan.ID]render.Object, len(objects))
	}
	for _, c := range cs {
		switch c.Action {
		case apply.Pruned:
			delete(w.st.applied, c.ID)
		case apply.Created, apply.Configured, apply.Unchanged, apply.Skipped:
			if o, ok := objects[c.ID]; ok {
				w.st.applied[c.ID] = o
			}
		}
	}
}

// Forget makes drift checks leave ids alone until a sync records them
// again.
func (w *Writer) Forget(ids ...plan.ID) {
	for _, id := range ids {
		delete(w.st.applied, id)
	}
}

// Replace makes objects (by ID), a render applied in full (or compared
// in full by a dry run), the only desired objects: anything not in it is
// no longer reverted or reported. The Store keeps objects itself, not a
// copy (a copy of a large Sync's was held beside it at the end of its
// first sync, the agent's memory's peak): the caller reads it afterwards
// but never changes it; later syncs change it through the Writer.
func (w *Writer) Replace(objects map[plan.ID]render.Object) {
	w.st.applied = objects
}

// Rendered returns each object of the Sync's cached render (SetRendered,
// which a sync calls with its render before it compares) by ID.
func (w *Writer) Rendered() map[plan.ID]render.Object {
	return indexed(w.store.renderedObjects(w.st))
}

// indexed maps objects by their ID.
func indexed(objects []render.Object) map[plan.ID]render.Object {
	out := make(map[plan.ID]render.Object, len(objects))
	for _, o := range objects {
		out[plan.ObjectID(o)] = o
	}
	return out
}

// AppliedJSONEquals reports whether object id was last applied as exactly
// the JSON data (nil never equals).
func (w *Writer) AppliedJSONEquals(id plan.ID, data []byte) bool {
	o, ok := w.st.applied[id]
	return ok && data != nil && o.JSON != nil && bytes.Equal(o.JSON, data)
}

// Applied returns, for a sync holding the gate, what key's object id was
// last applied as.
func (w *Writer) Applied(id plan.ID) (render.Object, bool) {
	o, ok := w.st.applied[id]
	return o, ok
}

// Checker is a drift check's shared hold on the gate of one Sync.
type Checker struct{ st *syncState }

// BeginCheck takes the gate of key shared, unless a sync of key is
// writing: then it returns false at once, and the caller tries again
// later (the sync may change or prune the very object).
func (s *Store) BeginCheck(key client.ObjectKey) (*Checker, bool) {
	st := s.state(key)
	if !st.gate.TryRLock() {
		return nil, false
	}
	return &Checker{st: st}, true
}

// Synced reports whether a sync of the Sync uid recorded what it applied
// in this process: until then a drift check has nothing to compare with.
func (c *Checker) Synced(uid types.UID) bool { return c.st.appliedUID == uid && c.st.applied != nil }

// Desired returns what object id of the Sync uid was last applied as;
// false when the Sync does not (or no longer) manage it.
func (c *Checker) Desired(uid types.UID, id plan.ID) (render.Object, bool) {
	if c.st.appliedUID != uid {
		return render.Object{}, false
	}
	o, ok := c.st.applied[id]
	return o, ok
}

// Secrets returns the Secret-derived values of the render last written
// (Writer.SetSecrets), for masking what the check reports; nil (hiding
// nothing) before any sync wrote.
func (c *Checker) Secrets() *redact.Set { return c.st.secrets }

// Release ends the check.
func (c *Checker) Release() { c.st.gate.RUnlock() }
