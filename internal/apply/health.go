package apply

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/driftless/driftless/internal/health"
)

// HealthWith is the verdict on the live object u: by the Sync's
// spec.healthChecks (checks) for the kinds they name, their message
// naming the expression that decided; by HealthOf for the others.
func HealthWith(ctx context.Context, checks *health.Checks, u *unstructured.Unstructured) (status.Status, string) {
	if r, ok := checks.Evaluate(ctx, u); ok {
		return r.Status, r.Message
	}
	return HealthOf(u)
}

// HealthOf is the kstatus verdict on the live object u, by the rules the
// wait for health uses: a Deployment is Current once rolled out and
// available, a Job once it has succeeded, an object without status once
// it exists. An object kstatus cannot read is Unknown, with the reason.
func HealthOf(u *unstructured.Unstructured) (status.Status, string) {
	res, err := status.Compute(u)
	if err != nil {
		return status.UnknownStatus, err.Error()
	}
	if u.GroupVersionKind().Group == "batch" && u.GetKind() == "Job" && res.Status == status.CurrentStatus {
		// kstatus calls a started Job Current; a wave after a migration
		// Job must wait until it has succeeded.
		return jobHealth(u)
	}
	return res.Status, res.Message
}
