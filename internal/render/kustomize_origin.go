package render

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io/fs"
	"path"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// originAnnotation is where Kustomize records the origin of an object when
// a kustomization asks for buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// askForOrigins serves Kustomize the kustomization file with
// originAnnotations added to its buildMetadata, so that each object
// records the file it came from. It reports whether it did.
func (c *refChecker) askForOrigins(file string, data []byte) bool {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || m == nil {
		return false
	}
	list, _ := m["buildMetadata"].([]any)
	m["buildMetadata"] = append(list, types.OriginAnnotations)
	out, err := json.Marshal(m)
	if err != nil {
		return false
	}
	c.fsys.replaced[file] = out
	return true
}

// originOf returns the file of the repository that Kustomize's origin
// annotation on obj names, relative to the directory built, dir; or "".
// strip removes the annotation.
func originOf(dir string, obj map[string]any, strip bool) string {
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	value, _ := annotations[originAnnotation].(string)
	if strip && annotations != nil {
		delete(annotations, originAnnotation)
		if len(annotations) == 0 {
			delete(meta, "annotations")
		}
	}
	var o resource.Origin
	if value == "" || yaml.Unmarshal([]byte(value), &o) != nil || o.Repo != "" {
		return ""
	}
	from := cmp.Or(o.Path, o.ConfiguredIn)
	if from == "" {
		return ""
	}
	from = path.Join(dir, filepath.ToSlash(from))
	if !fs.ValidPath(from) {
		return ""
	}
	return from
}
