package controller

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
)

// packed is a desired object as the Store keeps it between syncs: its
// JSON, about a third of the memory of the decoded map, decoded again
// only when a sync or a drift check reads it. Objects that hold Secret
// or decrypted values stay in memory only, as before.
type packed struct {
	id              plan.ID
	json            []byte
	origin          render.Origin
	secretVariables []string
	decrypted       bool
}

// pack encodes o. An object that does not encode (a render never makes
// one) does not unpack: a cache miss, and no drift revert until the next
// sync.
func pack(o render.Object) packed {
	data, err := json.Marshal(o.Object.Object)
	if err != nil {
		data = nil
	}
	return packed{id: plan.IDOf(o.Object), json: data, origin: o.Origin, secretVariables: o.SecretVariables, decrypted: o.Decrypted}
}

// unpack decodes p into a new object, which the caller may change.
func (p packed) unpack() (render.Object, bool) {
	var m map[string]any
	// k8s.io's json keeps integers int64, as a render has them.
	if p.json == nil || utiljson.Unmarshal(p.json, &m) != nil {
		return render.Object{}, false
	}
	return render.Object{Object: &unstructured.Unstructured{Object: m}, Origin: p.origin, SecretVariables: p.secretVariables, Decrypted: p.decrypted}, true
}

// packAll packs objects, sharing the JSON of those equal to one in
// shared, so that a render and what was applied from it are held once.
func packAll(objects []render.Object, shared []packed) []packed {
	var byID map[plan.ID][]byte
	if len(shared) > 0 {
		byID = make(map[plan.ID][]byte, len(shared))
		for _, p := range shared {
			byID[p.id] = p.json
		}
	}
	out := make([]packed, len(objects))
	for i, o := range objects {
		out[i] = pack(o)
		if b, ok := byID[out[i].id]; ok && bytes.Equal(b, out[i].json) {
			out[i].json = b
		}
	}
	return out
}

// unpackAll decodes ps; false if one does not decode.
func unpackAll(ps []packed) ([]render.Object, bool) {
	out := make([]render.Object, len(ps))
	for i, p := range ps {
		o, ok := p.unpack()
		if !ok {
			return nil, false
		}
		out[i] = o
	}
	return out, true
}

// jsonOf returns the JSON of each of ps that encoded.
func jsonOf(ps map[plan.ID]packed) map[plan.ID][]byte {
	out := make(map[plan.ID][]byte, len(ps))
	for id, p := range ps {
		if p.json != nil {
			out[id] = p.json
		}
	}
	return out
}
