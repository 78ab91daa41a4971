package engine

import (
	"context"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/render"
)

// lookup answers the lookup function of HelmCharts with spec.lookup
// through reader, the identity the Sync reads with: an object the Sync's
// ServiceAccount may not get is an error naming the lookup, never the
// agent's own read. A Secret is read as a Secret, so that reader (a
// SecretRecorder) masks its values in errors. Lists (an empty name) are
// refused: reader reads one object.
func lookup(ctx context.Context, reader Reader) render.LookupFunc {
	return func(apiVersion, kind, namespace, name string) (map[string]any, error) {
		what := fmt.Sprintf("lookup %s %s %s", apiVersion, kind, path.Join(namespace, name))
		if name == "" {
			return nil, fmt.Errorf("%s: driftless answers the lookup of one object by its name, not of a list; name the object", what)
		}
		var obj client.Object
		if apiVersion == "v1" && kind == "Secret" {
			obj = &corev1.Secret{}
		} else {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(apiVersion)
			u.SetKind(kind)
			obj = u
		}
		err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			return map[string]any{}, nil
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("%s was denied to the identity the Sync reads with (%s); grant its ServiceAccount get on it, or turn spec.lookup off", what, apierrors.ReasonForError(err))
		case err != nil:
			return nil, fmt.Errorf("%s failed: %w", what, err)
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return u.Object, nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		m["apiVersion"], m["kind"] = "v1", "Secret"
		return m, nil
	}
}
