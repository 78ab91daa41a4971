package crd

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/driftless/driftless/api/v1alpha1"
)

// The agent's fallbacks for an undefaulted interval and timeout must be
// what the CRD defaults them to.
func TestCRDDefaultsMatchTheAgentsFallbacks(t *testing.T) {
	def, err := SyncCRD()
	if err != nil {
		t.Fatal(err)
	}
	spec := def.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	for field, want := range map[string]time.Duration{"interval": v1alpha1.DefaultInterval, "timeout": v1alpha1.DefaultTimeout} {
		d := spec[field].Default
		if d == nil {
			t.Errorf("spec.%s has no default in the CRD", field)
			continue
		}
		var s string
		if err := json.Unmarshal(d.Raw, &s); err != nil {
			t.Fatalf("spec.%s default %s: %v", field, d.Raw, err)
		}
		got, err := time.ParseDuration(s)
		if err != nil || got != want {
			t.Errorf("spec.%s defaults to %q in the CRD, but the agent falls back to %s", field, s, want)
		}
	}
}
