package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config"
)

// minMinor is the oldest Kubernetes 1.x the agent supports: server-side
// apply, SelfSubjectReview and CEL validation of CRDs are GA there.
const minMinor = 28

// checkOptions are the flags of `driftless check`.
type checkOptions struct {
	cluster   clusterFlags
	namespace string
}

func newCheckCommand() *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the cluster version, the agent's permissions and its health",
		Long: fmt.Sprintf(`Check that the cluster can run driftless and that the agent is healthy:

  - the Kubernetes version is 1.%d or newer;
  - the Sync CRD is installed and established;
  - the agent's service account (driftless in --namespace) may do what the
    roles of config/rbac grant it, asked of the API server with one
    SubjectAccessReview per verb and resource (so a binding that is missing
    or was taken away shows);
  - the agent's Deployment is rolled out and available.

Each check prints one line, "ok" or "FAIL" with what is wrong. The exit code
is 0 when every check passed, 1 when one failed, 2 when the cluster could not
be asked.`, minMinor),
		Example: `  driftless check
  driftless check --context prod --namespace driftless-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheck(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.namespace, "namespace", installNamespace, "the agent's namespace")
	o.cluster.add(cmd)
	return cmd
}

func runCheck(ctx context.Context, o *checkOptions, out io.Writer) error {
	cfg, err := o.cluster.load()
	if err != nil {
		return err
	}
	c, err := client.New(cfg.rest, client.Options{Scheme: v1alpha1.NewScheme()})
	if err != nil {
		return fmt.Errorf("connect to the API server %s: %w", cfg.rest.Host, err)
	}
	failed := 0
	report := func(ok bool, format string, args ...any) {
		status := "ok  "
		if !ok {
			status = "FAIL"
			failed++
		}
		fmt.Fprintf(out, "%s  %s\n", status, fmt.Sprintf(format, args...))
	}

	dc, err := discovery.NewDiscoveryClientForConfig(cfg.rest)
	if err != nil {
		return fmt.Errorf("connect to the API server %s: %w", cfg.rest.Host, err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("ask the API server %s its version: %w", cfg.rest.Host, err)}
	}
	minor, _ := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	report(v.Major == "1" && minor >= minMinor, "Kubernetes %s at %s (driftless needs 1.%d or newer)", v.GitVersion, cfg.rest.Host, minMinor)

	var def apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "syncs.driftless.dev"}, &def); err != nil {
		report(false, "the Sync CRD syncs.driftless.dev: %v; run `driftless install`", err)
	} else {
		established := false
		for _, cond := range def.Status.Conditions {
			established = established || cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
		}
		report(established, "the Sync CRD syncs.driftless.dev is established")
	}

	sa := "system:serviceaccount:" + o.namespace + ":driftless"
	denied, asked, err := checkPermissions(ctx, c, o.namespace, sa)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("ask the API server %s what %s may do: %w", cfg.rest.Host, sa, err)}
	}
	if len(denied) == 0 {
		report(true, "%s may do all %d things config/rbac grants it", sa, asked)
	}
	for _, d := range denied {
		report(false, "%s may not %s; apply config/rbac (or run `driftless install`) to grant it", sa, d)
	}

	var d appsv1.Deployment
	key := client.ObjectKey{Namespace: o.namespace, Name: installDeployment}
	if err := c.Get(ctx, key, &d); err != nil {
		report(false, "the agent's Deployment %s: %v; run `driftless install`", key, err)
	} else {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		ok := d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas >= want
		report(ok, "the agent's Deployment %s: %d of %d replicas updated and available", key, min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas), want)
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d check(s) failed", failed)}
	}
	return nil
}

// checkPermissions asks, for every verb and resource of the Roles and
// ClusterRoles of config/rbac, whether user may do it, and returns what
// it may not, as "verb resource (in namespace)".
func checkPermissions(ctx context.Context, c client.Client, namespace, user string) ([]string, int, error) {
	objs, err := config.Manifests("rbac")
	if err != nil {
		return nil, 0, err
	}
	var denied []string
	asked := 0
	for _, obj := range objs {
		ns := ""
		switch obj.GetKind() {
		case "Role":
			ns = namespace
		case "ClusterRole":
		default:
			continue
		}
		var role rbacv1.ClusterRole // a Role has the same rules
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			return nil, 0, err
		}
		for _, rule := range role.Rules {
			for _, group := range rule.APIGroups {
				for _, resource := range rule.Resources {
					for _, verb := range rule.Verbs {
						names := rule.ResourceNames
						if len(names) == 0 {
							names = []string{""}
						}
						for _, name := range names {
							resourceName, subresource, _ := strings.Cut(resource, "/")
							sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
								User:   user,
								Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
								ResourceAttributes: &authorizationv1.ResourceAttributes{
									Namespace: ns, Verb: verb, Group: group, Resource: resourceName, Subresource: subresource, Name: name,
								},
							}}
							if err := c.Create(ctx, sar); err != nil {
								return nil, 0, err
							}
							asked++
							if !sar.Status.Allowed {
								what := verb + " " + resource
								if group != "" {
									what = verb + " " + resource + "." + group
								}
								if name != "" {
									what += " " + name
								}
								if ns != "" {
									what += " in " + ns
								}
								denied = append(denied, what)
							}
						}
					}
				}
			}
		}
	}
	return denied, asked, nil
}
