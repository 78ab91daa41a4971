package engine

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/render"
)

// Capabilities returns what Helm charts see of the cluster in
// .Capabilities: its version, such as "v1.37.2", and every group/version
// and group/version/kind it serves, as helm install reads them. An API
// group whose discovery fails is left out, as Helm leaves it out.
func Capabilities(dc discovery.DiscoveryInterface) (string, []string, error) {
	info, err := dc.ServerVersion()
	if err != nil {
		return "", nil, fmt.Errorf("kubernetes version for charts' .Capabilities: %w", err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return "", nil, fmt.Errorf("api versions for charts' .Capabilities: %w", err)
	}
	var versions []string
	for _, l := range lists {
		versions = append(versions, l.GroupVersion)
		for _, r := range l.APIResources {
			versions = append(versions, l.GroupVersion+"/"+r.Kind)
		}
	}
	slices.Sort(versions)
	return info.GitVersion, slices.Compact(versions), nil
}

// valuesReader reads the values of HelmCharts' valuesFrom from the
// ConfigMaps and Secrets in namespace.
func valuesReader(ctx context.Context, reader Reader, namespace string) render.ValuesReader {
	return func(kind, name, key string) ([]byte, error) {
		objKey := client.ObjectKey{Namespace: namespace, Name: name}
		var data map[string][]byte
		switch kind {
		case "Secret":
			var s corev1.Secret
			if err := reader.Get(ctx, objKey, &s); err != nil {
				return nil, getError(err)
			}
			data = s.Data
		default:
			var cm corev1.ConfigMap
			if err := reader.Get(ctx, objKey, &cm); err != nil {
				return nil, getError(err)
			}
			data = map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				data[k] = v
			}
		}
		v, ok := data[key]
		if !ok {
			return nil, fmt.Errorf("has no key %s: %w", key, render.ErrValuesNotFound)
		}
		return v, nil
	}
}

func getError(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("does not exist in the Sync's namespace: %w", render.ErrValuesNotFound)
	}
	return fmt.Errorf("cannot be read: %w", err)
}
