// Package config holds the install manifests (crd/, rbac/, manager/,
// default/) and embeds the agent's RBAC and Deployment so that
// `driftless install` applies exactly what `kubectl apply -k
// config/default` would.
package config

import (
	"bytes"
	"embed"
	"fmt"
	"io"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

//go:embed rbac/*.yaml manager/*.yaml
var files embed.FS

// Manifests returns the objects of the kustomization in dir ("rbac" or
// "manager"), file by file in the order of its resources. Every call
// returns new objects.
func Manifests(dir string) ([]*unstructured.Unstructured, error) {
	raw, err := files.ReadFile(path.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("embedded config/%s has no kustomization.yaml: %w", dir, err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := sigsyaml.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("embedded config/%s/kustomization.yaml: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		data, err := files.ReadFile(path.Join(dir, r))
		if err != nil {
			return nil, fmt.Errorf("embedded config/%s lists %s but does not embed it: %w", dir, r, err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("embedded config/%s/%s: %w", dir, r, err)
			}
			if len(u.Object) > 0 {
				out = append(out, u)
			}
		}
	}
	return out, nil
}
