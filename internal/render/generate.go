package render

import (
	"errors"
	"fmt"
	"path"
)

// A generator makes the objects of one part of the repository: a manifest
// file, or a directory that holds a kustomization. It adds them with
// r.addValue, which checks them and counts them against the budgets, and
// reports problems with r.fail, or r.stop when over a budget. Render then
// settles the objects of every generator the same way: namespaces, the
// sync label, the origin annotation, and objects defined twice.
type generator interface {
	// path is the file of the repository the generator starts from, such
	// as "apps/prod/kustomization.yaml"; errors are sorted by it.
	path() string
	generate(r *renderer)
}

var (
	_ generator = manifestFile("")
	_ generator = kustomization{}
)

// manifestFile is a plain YAML or JSON file of objects.
type manifestFile string

func (f manifestFile) path() string { return string(f) }

func (f manifestFile) generate(r *renderer) { r.addFile(string(f)) }

// addFile reads one file and adds its objects.
func (r *renderer) addFile(name string) {
	data, err := r.readFile(name)
	var de *decryptError
	switch {
	case errors.As(err, &de):
		r.fail(Origin{Path: name}, "", de.err)
		return
	case errors.Is(err, ErrOverBudget):
		r.stop(Origin{Path: name}, "", err)
		return
	case err != nil:
		r.fail(Origin{Path: name}, "", err)
		return
	}
	if r.decrypted[name] {
		defer r.markDecrypted(len(r.pending))
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
			r.addValue(o, "document", v, nil)
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
		v, data, err := decodeYAML(doc)
		switch {
		case err != nil:
			r.fail(o, "", err)
		case v == nil || !r.countDecoded(o, decodedSize(v)):
		case isHelmChart(v):
			r.addHelmChart(o, doc)
		default:
			r.addValue(o, "document", v, data)
		}
		if r.over {
			return
		}
	}
}
