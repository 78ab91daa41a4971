package inventory

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/plan"
)

// Digest is what the agent last verified of one object of an inventory:
// the digest of its desired form (DesiredDigest of the render's JSON),
// and the mark of the live object (drift.Mark) when the agent last found
// it equal to that form, by writing it or comparing it. A restarted agent
// that renders the same desired form and finds the same mark in its
// watches knows the object is still in sync without asking the API
// server. The zero Digest says nothing.
type Digest struct {
	Desired [8]byte
	Live    [8]byte
}

// Known reports whether d says anything.
func (d Digest) Known() bool { return d != Digest{} }

// Digests holds a Digest by object.
type Digests map[plan.ID]Digest

// originRevision matches the revision part of the origin annotation in a
// render's JSON. A commit that leaves an object as it was does not
// rewrite it (apply.Equal leaves that part out), so the live object keeps
// the revision that last changed it, and the digest does not count it.
var originRevision = regexp.MustCompile(`("` + regexp.QuoteMeta(v1alpha1.OriginAnnotation) + `":"[^"\\]*)@[0-9a-f]+"`)

// DesiredDigest is the Desired part of a Digest for a rendered object's
// JSON (as the agent caches a render: encoding/json of the object's map,
// keys sorted), the revision in its origin annotation left out. The
// prefix names how an agent applies such a form: an agent that applies
// differently changes it, and its Digests then tell nothing of the ones
// before.
func DesiredDigest(json []byte) [8]byte {
	h := sha256.New()
	h.Write([]byte("driftless desired v1\x00"))
	h.Write(originRevision.ReplaceAll(json, []byte(`$1"`)))
	var out [8]byte
	copy(out[:], h.Sum(nil))
	return out
}

// digestsPrefix starts the Inventory's digests field; recordSize is the
// bytes of one entry's Digest in it.
const (
	digestsPrefix = "v1:"
	recordSize    = 16
)

// encodeDigests is the Inventory's digests field for entries: each
// entry's Digest in d (zero when absent), in their order; "" when d knows
// none of them.
func encodeDigests(entries []plan.Entry, d Digests) string {
	if len(d) == 0 {
		return ""
	}
	raw := make([]byte, recordSize*len(entries))
	known := false
	for i, e := range entries {
		dg, ok := d[e.ID]
		if !ok || !dg.Known() {
			continue
		}
		known = true
		copy(raw[recordSize*i:], dg.Desired[:])
		copy(raw[recordSize*i+8:], dg.Live[:])
	}
	if !known {
		return ""
	}
	return digestsPrefix + base64.StdEncoding.EncodeToString(raw)
}

// DigestsOf reads the digests of inv's entries: none when its digests
// field is absent, of another version, or not one Digest per entry (an
// agent that knew no digests rewrote the entries and not the digests: it
// never writes them, server-side apply drops them). An entry that cannot
// be parsed has no Digest.
func DigestsOf(inv *v1alpha1.Inventory) Digests {
	rest, ok := strings.CutPrefix(inv.Digests, digestsPrefix)
	if !ok {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(raw) != recordSize*len(inv.Entries) {
		return nil
	}
	out := make(Digests, len(inv.Entries))
	for i, e := range inv.Entries {
		id, err := Decode(e.ID)
		if err != nil {
			continue
		}
		var d Digest
		copy(d.Desired[:], raw[recordSize*i:])
		copy(d.Live[:], raw[recordSize*i+8:])
		if d.Known() {
			out[id] = d
		}
	}
	return out
}
