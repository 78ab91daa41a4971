package render

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// statefulSetDB and memoryPatchDB are a StatefulSet and a strategic merge
// patch of its containers.
const (
	statefulSetDB = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  template:
    spec:
      containers:
      - {name: db, image: postgres:17}
`
	memoryPatchDB = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  template:
    spec:
      containers:
      - name: db
        resources: {requests: {memory: 64Mi}}
`
)

// Builds run in parallel, and each sees the OpenAPI schema its own
// kustomizations set, or the built-in one when they set none, however
// the builds of other Syncs interleave: a strategic merge patch merges a
// StatefulSet's containers with the built-in schema, and replaces them
// with a custom schema that defines no kinds.
func TestKustomizeBuildsInParallelEachWithItsOwnSchema(t *testing.T) {
	custom := checkout(t, map[string]string{
		"kustomization.yaml": "resources: [db.yaml]\npatches:\n- path: memory.yaml\nopenapi:\n  path: schema.json\n",
		"schema.json":        `{"swagger": "2.0", "info": {"title": "none", "version": "v1"}, "paths": {}, "definitions": {}}`,
		"db.yaml":            statefulSetDB,
		"memory.yaml":        memoryPatchDB,
	})
	builtin := checkout(t, map[string]string{
		"kustomization.yaml": "resources: [db.yaml]\npatches:\n- path: memory.yaml\n",
		"db.yaml":            statefulSetDB,
		"memory.yaml":        memoryPatchDB,
	})
	memory := map[string]any{"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}
	merged := []any{map[string]any{"name": "db", "image": "postgres:17", "resources": memory["resources"]}}
	replaced := []any{map[string]any{"name": "db", "resources": memory["resources"]}}

	const builds = 24
	errs := make([]error, builds)
	var wg sync.WaitGroup
	for i := range builds {
		root, want := builtin, merged
		if i%3 == 0 {
			root, want = custom, replaced
		}
		wg.Go(func() {
			objs, err := Render(Options{Root: root, Paths: []string{"."}, Scope: cluster})
			if err != nil {
				errs[i] = err
				return
			}
			db := byName(objs)["StatefulSet/db"]
			if db == nil {
				errs[i] = fmt.Errorf("no StatefulSet db in %d objects", len(objs))
				return
			}
			containers, _, _ := unstructured.NestedSlice(db.Object, "spec", "template", "spec", "containers")
			if diff := cmp.Diff(want, containers); diff != "" {
				errs[i] = fmt.Errorf("containers (-want +got):\n%s", diff)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			schema := "the built-in schema"
			if i%3 == 0 {
				schema = "a custom schema"
			}
			t.Errorf("build %d, with %s: %v", i, schema, err)
		}
	}
}
