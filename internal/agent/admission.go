package agent

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/admission"
)

// admissionServer builds the admission webhook of the agent's options.
// The agent's own user, which its writes pass as, is asked of the API
// server.
func admissionServer(ctx context.Context, mgr ctrl.Manager, direct client.Client, o Options) (*admission.Server, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := direct.Create(ctx, review); err != nil {
		return nil, fmt.Errorf("--admission-warnings: ask the API server who the agent is (SelfSubjectReview): %w", err)
	}
	opts := admission.DefaultOptions()
	opts.Addr, opts.URL, opts.Namespace, opts.Client = o.AdmissionAddr, o.AdmissionURL, o.Namespace, direct
	opts.Handler = &admission.Handler{
		Syncs:   mgr.GetClient(),
		Objects: mgr.GetAPIReader(),
		Mapper:  mgr.GetRESTMapper(),
		Identity: admission.Identity{
			AgentUser:             review.Status.UserInfo.Username,
			BreakGlassGroup:       o.AdmissionBreakGlassGroup,
			AgentNamespace:        o.Namespace,
			DefaultServiceAccount: o.DefaultServiceAccount,
		},
	}
	return admission.New(opts)
}
