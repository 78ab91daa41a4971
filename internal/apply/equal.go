package apply

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Equal reports whether the object found in the cluster already matches
// the result of applying the desired object (a server-side dry-run
// response), so that applying it would change nothing a user can see.
//
// Server-maintained metadata is ignored, and so is the revision part of
// the origin annotation: a new commit that leaves an object as it was
// does not rewrite it, so the annotation names the revision that last
// changed the object.
func Equal(live, applied *unstructured.Unstructured) bool {
	return equality.Semantic.DeepEqual(comparable(live).Object, comparable(applied).Object)
}

func comparable(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	if ann := c.GetAnnotations(); ann != nil {
		if origin, ok := ann[v1alpha1.OriginAnnotation]; ok {
			if i := strings.LastIndex(origin, "@"); i >= 0 {
				origin = origin[:i]
			}
			ann[v1alpha1.OriginAnnotation] = origin
			c.SetAnnotations(ann)
		}
	}
	return c
}
