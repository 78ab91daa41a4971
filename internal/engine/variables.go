package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/render"
)

// ErrVariablesUnreadable wraps an error of the API server while reading a
// ConfigMap or Secret of spec.substituteFrom: unlike a missing object or
// a bad key, a retry may succeed.
var ErrVariablesUnreadable = errors.New("variables could not be read")

// Variables returns the variables of the Sync's spec.substituteFrom and
// spec.substitute, reading its ConfigMaps and Secrets with reader (use
// an uncached reader: Secrets must not be cached). Later substituteFrom
// entries override earlier ones and spec.substitute overrides them all.
// It returns nil when the Sync sets neither field: then nothing is
// substituted. A missing object that is not optional, or a data key that
// is not a variable name, is an error naming the object and never a
// value; an API error reading one wraps ErrVariablesUnreadable.
func Variables(ctx context.Context, reader Reader, s *v1alpha1.Sync) (map[string]render.Variable, error) {
	if s.Spec.Substitute == nil && len(s.Spec.SubstituteFrom) == 0 {
		return nil, nil
	}
	vars := map[string]render.Variable{}
	for i, ref := range s.Spec.SubstituteFrom {
		key := client.ObjectKey{Namespace: s.Namespace, Name: ref.Name}
		var data map[string]string
		var err error
		secret := ref.Kind == "Secret"
		switch ref.Kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			err = reader.Get(ctx, key, &cm)
			data = cm.Data
		case "Secret":
			var sec corev1.Secret
			err = reader.Get(ctx, key, &sec)
			data = make(map[string]string, len(sec.Data))
			for k, v := range sec.Data {
				data[k] = string(v)
			}
		default:
			return nil, fmt.Errorf("spec.substituteFrom[%d] has kind %q; use ConfigMap or Secret", i, ref.Kind)
		}
		switch {
		case apierrors.IsNotFound(err) && ref.Optional:
			continue
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%s %s of spec.substituteFrom[%d] does not exist; create it, or mark the entry optional: true", ref.Kind, key, i)
		case err != nil:
			return nil, fmt.Errorf("%w: read %s %s of spec.substituteFrom[%d]: %w", ErrVariablesUnreadable, ref.Kind, key, i, err)
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if !render.VariableName.MatchString(k) {
				return nil, fmt.Errorf("%s %s of spec.substituteFrom[%d] has key %q, which is not a variable name (%s); rename the key or use another %s", ref.Kind, key, i, k, render.VariableName, ref.Kind)
			}
			vars[k] = render.Variable{Value: data[k], Secret: secret}
		}
	}
	for k, v := range s.Spec.Substitute {
		if !render.VariableName.MatchString(k) {
			return nil, fmt.Errorf("spec.substitute has %q, which is not a variable name (%s); rename it", k, render.VariableName)
		}
		vars[k] = render.Variable{Value: v}
	}
	return vars, nil
}

// VariablesDigest is a digest of vars, for caching a render: it changes
// whenever a name, a value or where a value came from does. It is "" for
// nil (no substitution).
func VariablesDigest(vars map[string]render.Variable) string {
	if vars == nil {
		return ""
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		v := vars[k]
		fmt.Fprintf(h, "%d:%s%d:%s%t\n", len(k), k, len(v.Value), v.Value, v.Secret)
	}
	return hex.EncodeToString(h.Sum(nil))
}
