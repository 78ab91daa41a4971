package cli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/admission"
)

func addAdmissionFlags(f *pflag.FlagSet, o *agentOptions) {
	d := admission.DefaultOptions()
	f.BoolVar(&o.admission, "admission-warnings", false, "serve a validating admission webhook: kubectl edits and deletes of objects a Sync manages print where in git to change them and whether they will be reverted; objects annotated driftless.dev/protect=deny refuse such edits and deletes (docs/admission.md)")
	f.StringVar(&o.admissionAddr, "admission-bind-address", d.Addr, "HTTPS address of the admission webhook")
	f.StringVar(&o.admissionURL, "admission-webhook-url", "", "URL the API server calls for the admission webhook, such as https://127.0.0.1:9443"+admission.Path+" for an agent outside the cluster; default: the Service "+d.Service+" in the agent's namespace")
	f.StringVar(&o.admissionBreakGlass, "admission-break-glass-group", "", "group whose members may edit and delete objects annotated driftless.dev/protect=deny (with a warning); empty: nobody but the agent")
}

// admissionServer builds the admission webhook of the agent's flags. The
// agent's own user, which its writes pass as, is asked of the API server.
func admissionServer(ctx context.Context, mgr ctrl.Manager, direct client.Client, o *agentOptions) (*admission.Server, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := direct.Create(ctx, review); err != nil {
		return nil, fmt.Errorf("--admission-warnings: ask the API server who the agent is (SelfSubjectReview): %w", err)
	}
	opts := admission.DefaultOptions()
	opts.Addr, opts.URL, opts.Namespace, opts.Client = o.admissionAddr, o.admissionURL, o.namespace, direct
	opts.Handler = &admission.Handler{
		Syncs:   mgr.GetClient(),
		Objects: mgr.GetAPIReader(),
		Mapper:  mgr.GetRESTMapper(),
		Identity: admission.Identity{
			AgentUser:             review.Status.UserInfo.Username,
			BreakGlassGroup:       o.admissionBreakGlass,
			AgentNamespace:        o.namespace,
			DefaultServiceAccount: o.defaultServiceAccount,
		},
	}
	return admission.New(opts)
}
