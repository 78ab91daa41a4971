package admission

import (
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/health"
)

// DecideSync refuses a Sync whose spec.healthChecks do not compile or
// whose estimated cost is over the limit, with the message the agent
// would stall it with (InvalidSpec), naming each field.
func DecideSync(s *v1alpha1.Sync) Decision {
	if _, err := health.Compile(s.Spec.HealthChecks); err != nil {
		return Decision{Message: fmt.Sprintf("Sync %s/%s: %v", s.Namespace, s.Name, err)}
	}
	return Decision{Allowed: true}
}

// reviewSync decides the create or update of a Sync (ok false for any
// other request). A body it cannot read is left to the API server's own
// validation.
func reviewSync(req *admissionv1.AdmissionRequest) (d Decision, ok bool) {
	if req.Resource.Group != v1alpha1.GroupVersion.Group || req.Resource.Resource != "syncs" || req.SubResource != "" ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return Decision{}, false
	}
	var s v1alpha1.Sync
	if err := json.Unmarshal(req.Object.Raw, &s); err != nil {
		return Decision{Allowed: true}, true
	}
	if s.Namespace == "" {
		s.Namespace = req.Namespace
	}
	return DecideSync(&s), true
}
