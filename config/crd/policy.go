package crd

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

//go:embed policy/sync-label-length.yaml
var policyYAML []byte

// SyncPolicies returns the admission policies that go with the Sync CRD:
// a ValidatingAdmissionPolicy refusing a Sync whose "<namespace>.<name>"
// does not fit a label value, and its binding. Every call returns new
// objects.
func SyncPolicies() ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(policyYAML), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("embedded policy/sync-label-length.yaml does not decode: %w", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
