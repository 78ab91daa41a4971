package drift

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Size bounds for what drift writes into a Sync's status. A Sync is one
// etcd value: once a status write would take it past etcd's request limit,
// every later status write of that Sync fails too, so nothing that a
// cluster user can make large (a ConfigMap value, a map key) is copied
// into the status unbounded.
const (
	// MaxValue is the most bytes a field's git or found value keeps.
	MaxValue = 256
	// MaxPath is the most bytes a field's path (or an incident's origin
	// file) keeps; paths include map keys, which can be long.
	MaxPath = 512
	// MaxManager is the most bytes a field manager's name keeps (the API
	// server allows 128).
	MaxManager = 128
	// MaxMessage is the most bytes an incident's or a sync record's
	// message keeps.
	MaxMessage = 1024

	// StatusBudget is the most bytes (as JSON) that a Sync's conditions,
	// sync history and drift incidents may take together. etcd refuses
	// requests over 1.5 MiB (--max-request-bytes, 1,572,864 bytes), and
	// a Sync is stored as JSON in one request. The inventory is not
	// counted here and not cut: at 10,000 objects it takes about 0.6 to
	// 1 MiB ({"id":"<group>/<Kind>/<ns>/<name>","v":"v1"} is 50 to 100
	// bytes an entry). 128 KiB for the rest leaves that room, plus spec,
	// metadata and managedFields (a few KiB). It holds MaxDrift
	// incidents of ordinary size (about 1 KiB each) many times over; only
	// incidents near their bounds (10 fields of MaxValue bytes each) make
	// older ones drop.
	StatusBudget = 128 << 10
)

// BoundValue returns s when it has at most MaxValue bytes. A longer s
// becomes its first bytes (cut on a character boundary) followed by
// "… (N bytes, sha256:0123456789ab)", MaxValue bytes at most in all, so
// that two long values that differ anywhere still read differently.
// Bounding a bounded value returns it unchanged. Never call it on a
// Secret value: a hash of a secret is a way to check guesses of it.
func BoundValue(s string) string { return bound(s, MaxValue) }

func bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := fmt.Sprintf("… (%d bytes, sha256:%x)", len(s), sum[:6])
	cut := max(limit-len(suffix), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}

// Bound returns c with its path, values and manager bounded.
func (c FieldChange) Bound() FieldChange {
	c.Path = bound(c.Path, MaxPath)
	c.Git = BoundValue(c.Git)
	c.Found = BoundValue(c.Found)
	c.Manager = bound(c.Manager, MaxManager)
	return c
}

// BoundIncident returns inc with every field, its origin and its message
// bounded; its Fields are copied, not shared with inc.
func BoundIncident(inc v1alpha1.DriftIncident) v1alpha1.DriftIncident {
	inc.Object = bound(inc.Object, MaxPath)
	inc.Origin = bound(inc.Origin, MaxPath)
	inc.Message = bound(inc.Message, MaxMessage)
	fields := make([]v1alpha1.DriftField, len(inc.Fields))
	for i, f := range inc.Fields {
		f.Path = bound(f.Path, MaxPath)
		f.Git = BoundValue(f.Git)
		f.Found = BoundValue(f.Found)
		f.Manager = bound(f.Manager, MaxManager)
		fields[i] = f
	}
	if inc.Fields != nil {
		inc.Fields = fields
	}
	return inc
}

// FitStatus bounds every drift incident and sync record message of st,
// then drops the oldest drift incidents and sync records (whichever is
// older first) until st, without its inventory, takes at most budget
// bytes as JSON. The newest incident and the newest record are always
// kept; by their bounds they take a few KiB. It returns how many entries
// it dropped.
func FitStatus(st *v1alpha1.SyncStatus, budget int) int {
	for i := range st.Drift {
		st.Drift[i] = BoundIncident(st.Drift[i])
	}
	for i := range st.History {
		st.History[i].Message = bound(st.History[i].Message, MaxMessage)
	}
	size := StatusSize(st)
	dropped := 0
	for size > budget && (len(st.Drift) > 1 || len(st.History) > 1) {
		dropDrift := len(st.History) <= 1 ||
			(len(st.Drift) > 1 && !st.History[len(st.History)-1].StartedAt.Before(&st.Drift[len(st.Drift)-1].Time))
		if dropDrift {
			size -= jsonSize(st.Drift[len(st.Drift)-1]) + 1
			st.Drift = st.Drift[:len(st.Drift)-1]
		} else {
			size -= jsonSize(st.History[len(st.History)-1]) + 1
			st.History = st.History[:len(st.History)-1]
		}
		dropped++
	}
	return dropped
}

// StatusSize is the size in bytes of st as JSON, without its inventory:
// what StatusBudget bounds.
func StatusSize(st *v1alpha1.SyncStatus) int {
	rest := *st
	rest.Inventory = nil
	return jsonSize(rest)
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0 // the API types always marshal
	}
	return len(b)
}
