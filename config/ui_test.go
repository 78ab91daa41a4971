package config_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// config/ui is config/default plus the dashboard: the flag and port on
// the agent, a Service, and the ClusterRole that reviews tokens,
// authorises viewers and impersonates them, and nothing else.
func TestUIKustomizationServesTheDashboardWithOnlyTheRightsItUses(t *testing.T) {
	objs := buildDir(t, "ui")
	d := find[*appsv1.Deployment](t, objs, namespace, "driftless")
	agent := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(agent.Args, "--ui-bind-address=:9394") {
		t.Errorf("the agent's args %q lack --ui-bind-address=:9394", agent.Args)
	}
	if !slices.ContainsFunc(agent.Ports, func(p corev1.ContainerPort) bool { return p.Name == "dashboard" && p.ContainerPort == 9394 }) {
		t.Errorf("the agent's ports %+v lack dashboard 9394", agent.Ports)
	}
	svc := find[*corev1.Service](t, objs, namespace, "driftless-dashboard")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.FromString("dashboard") {
		t.Errorf("Service driftless-dashboard ports %+v, want one to the dashboard port", svc.Spec.Ports)
	}
	want := []rbacv1.PolicyRule{
		// ui.authenticator.review: who each request's token is.
		rule("authentication.k8s.io", "tokenreviews", "create"),
		// ui.authenticator.authorize: may the viewer get, list or patch Syncs.
		rule("authorization.k8s.io", "subjectaccessreviews", "create"),
		// ui.authenticator.clientAs: every other read and write as the viewer.
		rule("", "users,groups", "impersonate"),
	}
	if diff := cmp.Diff(want, find[*rbacv1.ClusterRole](t, objs, "", "driftless-dashboard").Rules); diff != "" {
		t.Errorf("ClusterRole driftless-dashboard rules (-want +got):\n%s", diff)
	}
	b := find[*rbacv1.ClusterRoleBinding](t, objs, "", "driftless-dashboard")
	if b.RoleRef.Name != "driftless-dashboard" || len(b.Subjects) != 1 || b.Subjects[0].Name != "driftless" || b.Subjects[0].Namespace != namespace {
		t.Errorf("ClusterRoleBinding driftless-dashboard binds %s to %+v", b.RoleRef.Name, b.Subjects)
	}
	// config/default serves no dashboard.
	for _, o := range build(t) {
		if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == "driftless-dashboard" {
			t.Error("config/default binds the dashboard's ClusterRole; it is off by default")
		}
	}
}
