package config_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
)

// rule is a PolicyRule written on one line.
func rule(groups, resources, verbs string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: strings.Split(groups, ","), Resources: strings.Split(resources, ","), Verbs: strings.Split(verbs, ",")}
}

// The agent's own rights are exactly these; a rule added to config/rbac
// must be added here with the code that needs it, and
// TestTheAgentRunsWithOnlyTheShippedRBAC shows the agent needs no more.
func TestTheShippedRBACGrantsOnlyWhatTheAgentUses(t *testing.T) {
	objs := build(t)
	manager := []rbacv1.PolicyRule{
		// controller.SyncReconciler and the manager's cache: get, list and
		// watch Syncs; patch adds and removes the finalizer; cli install
		// server-side applies the root Sync (create on its first apply).
		rule("driftless.dev", "syncs", "get,list,watch,create,patch"),
		// writeStatus, writeProgress, recordIncident: status patches.
		rule("driftless.dev", "syncs/status", "patch"),
		// saveInventory and the manager's cache (inventory.Read): each
		// Sync's Inventory is read, listed, watched and server-side
		// applied (create on its first apply).
		rule("driftless.dev", "inventories", "get,list,watch,create,patch"),
		// image.PolicyReconciler and the manager's cache: ImagePolicies
		// are listed and watched, their status patched (the image update
		// controller patches Syncs' status and requested-at, above).
		rule("driftless.dev", "imagepolicies", "get,list,watch"),
		rule("driftless.dev", "imagepolicies/status", "patch"),
		// cli install: applies the Sync CRD and waits for Established.
		rule("apiextensions.k8s.io", "customresourcedefinitions", "get,create,patch"),
		// cli install: applies the admission policy for Sync names.
		rule("admissionregistration.k8s.io", "validatingadmissionpolicies,validatingadmissionpolicybindings", "create,patch"),
		// admission.Server.register (--admission-warnings): server-side
		// applies the agent's Validating- and MutatingWebhookConfiguration.
		rule("admissionregistration.k8s.io", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "create,patch"),
		// engine.SourceRequest (git secretRef), engine.Variables
		// (substituteFrom) and the rest of what the Syncs of the agent's
		// namespace name (a tenant Sync's are read as its ServiceAccount),
		// receiver (the webhook Secret, and each namespace's
		// driftless-webhook Secret per TTL): one Get each.
		rule("", "secrets,configmaps", "get"),
		// the Sync and drift reconcilers' EventRecorder (events.k8s.io).
		rule("events.k8s.io", "events", "create,patch"),
		// controller.Watches: metadata-only watches of managed objects of
		// any kind a Sync applies, selected by the driftless.dev/sync label.
		// admission.Handler: with --admission-warnings, get reads the
		// object a */scale request scales.
		rule("*", "*", "get,list,watch"),
		// controller.Identities: act as the ServiceAccount a Sync names.
		rule("", "serviceaccounts", "impersonate"),
		// controller.Identities: mark those requests as the agent's
		// (v1alpha1.AgentExtraKey), and nothing else.
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/" + v1alpha1.AgentExtraKey},
			ResourceNames: []string{v1alpha1.AgentExtraValue}, Verbs: []string{"impersonate"}},
	}
	leader := []rbacv1.PolicyRule{
		// controller-runtime leader election: the driftless-agent Lease.
		rule("coordination.k8s.io", "leases", "get,create,update"),
		// controller-runtime leader election: its "became leader" Event.
		rule("", "events", "create,patch"),
	}
	if diff := cmp.Diff(manager, find[*rbacv1.ClusterRole](t, objs, "", "driftless-manager").Rules); diff != "" {
		t.Errorf("ClusterRole driftless-manager rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(leader, find[*rbacv1.Role](t, objs, namespace, "driftless-leader-election").Rules); diff != "" {
		t.Errorf("Role driftless-leader-election rules (-want +got):\n%s", diff)
	}
	admission := []rbacv1.PolicyRule{
		// admission.Server: creates the serving certificate's Secret once,
		rule("", "secrets", "create"),
		// then reads and renews only that Secret.
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"driftless-admission-tls"}, Verbs: []string{"get", "update"}},
	}
	if diff := cmp.Diff(admission, find[*rbacv1.Role](t, objs, namespace, "driftless-admission").Rules); diff != "" {
		t.Errorf("Role driftless-admission rules (-want +got):\n%s", diff)
	}
	notifyState := []rbacv1.PolicyRule{
		// notify.ConfigMapState: creates the dedup state's ConfigMap once,
		rule("", "configmaps", "create"),
		// then reads and updates only that ConfigMap.
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{v1alpha1.NotifyStateConfigMap}, Verbs: []string{"get", "update"}},
	}
	if diff := cmp.Diff(notifyState, find[*rbacv1.Role](t, objs, namespace, "driftless-notify").Rules); diff != "" {
		t.Errorf("Role driftless-notify rules (-want +got):\n%s", diff)
	}
	pushRelay := []rbacv1.PolicyRule{
		// receiver.Relay.Publish (a sharded agent's receiver): creates the
		// push notices' ConfigMap once,
		rule("", "configmaps", "create"),
		// then reads and updates it; receiver.Relay.Start lists and
		// watches it (by name) in every sharded agent.
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{v1alpha1.RelayConfigMap}, Verbs: []string{"get", "list", "watch", "update"}},
	}
	if diff := cmp.Diff(pushRelay, find[*rbacv1.Role](t, objs, namespace, "driftless-push-relay").Rules); diff != "" {
		t.Errorf("Role driftless-push-relay rules (-want +got):\n%s", diff)
	}
	// Nothing else grants the agent anything; cluster-admin goes to the
	// root Sync's ServiceAccount only.
	roles := []string{"driftless-leader-election", "driftless-admission", "driftless-notify", "driftless-push-relay"}
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.ClusterRole:
			if b.Name != "driftless-manager" {
				t.Errorf("an unexpected ClusterRole %s", b.Name)
			}
		case *rbacv1.Role:
			if !slices.Contains(roles, b.Name) {
				t.Errorf("an unexpected Role %s", b.Name)
			}
		case *rbacv1.ClusterRoleBinding:
			want := map[string]string{"driftless-manager": "driftless", "cluster-admin": "driftless-root"}[b.RoleRef.Name]
			if len(b.Subjects) != 1 || b.Subjects[0].Name != want || b.Subjects[0].Namespace != namespace {
				t.Errorf("ClusterRoleBinding %s binds %s to %+v", b.Name, b.RoleRef.Name, b.Subjects)
			}
		case *rbacv1.RoleBinding:
			if !slices.Contains(roles, b.RoleRef.Name) || len(b.Subjects) != 1 || b.Subjects[0].Name != "driftless" {
				t.Errorf("RoleBinding %s binds %s to %+v", b.Name, b.RoleRef.Name, b.Subjects)
			}
		}
	}
}

// The agent runs as its ServiceAccount with only the shipped RBAC bound
// (through impersonation), and serves both a root Sync (acting as
// driftless-root, cluster-admin) and a team's Sync (acting as the team's
// ServiceAccount), reverts drift, elects itself leader and records events.
func TestTheAgentRunsWithOnlyTheShippedRBAC(t *testing.T) {
	ctx := context.Background()
	cl := syncClient(t)
	ns := env.Namespace(t)   // the agent's namespace
	team := env.Namespace(t) // a team's
	app := ns + "-app"       // created by the root Sync
	t.Cleanup(func() { _ = cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}}) })
	installRBAC(t, cl, ns)

	// The team's account may write ConfigMaps in its namespace only, and
	// get the Secret its Sync names (read as the account).
	vars := rule("", "secrets", "get")
	vars.ResourceNames = []string{"vars"}
	mustCreate(t, cl,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: team}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: team},
			Rules: []rbacv1.PolicyRule{rule("", "configmaps", "get,list,watch,create,update,patch,delete"), vars}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: team},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: team}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vars", Namespace: team}, Data: map[string]string{"greeting": "hello"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vars", Namespace: team}, StringData: map[string]string{"token": "s3cret"}},
	)

	srv := testenv.NewGitServer(t)
	fleet := srv.NewRepo(t, "fleet")
	fleet.Commit(t, "root", map[string]string{
		"ns.yaml":   fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", app),
		"role.yaml": fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s-reader\nrules: []\n", ns),
		"cm.yaml":   fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: root\n  namespace: %s\n", app),
	})
	t.Cleanup(func() {
		_ = cl.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-reader"}})
	})
	apps := srv.NewRepo(t, "apps")
	apps.Commit(t, "team", map[string]string{
		"cm.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: %s\ndata:\n  greeting: ${greeting}\n  token: ${token}\n", team),
	})

	opts := agenttest.Options(t, impersonating("system:serviceaccount:"+ns+":driftless"), ns)
	opts.GitURL, opts.GitBranch, opts.SyncInterval = fleet.FileURL(), "main", 2*time.Second
	opts.SyncServiceAccount = "driftless-root"
	opts.AllowFileURLs = true
	opts.LeaderElect = true
	a := agenttest.Start(t, opts)
	teamSync := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: team},
		Spec: v1alpha1.SyncSpec{
			Source:             v1alpha1.Source{Git: v1alpha1.GitSource{URL: apps.FileURL(), Branch: "main"}},
			Interval:           metav1.Duration{Duration: time.Hour},
			ServiceAccountName: "deployer",
			SubstituteFrom: []v1alpha1.SubstituteReference{
				{Kind: "ConfigMap", Name: "vars"}, {Kind: "Secret", Name: "vars"},
			},
		},
	}
	a.Eventually("the Sync CRD is installed", func() string {
		if err := cl.Create(ctx, teamSync.DeepCopy()); err != nil {
			return err.Error()
		}
		return ""
	})
	a.Eventually("the root Sync is Ready", syncReady(cl, client.ObjectKey{Namespace: ns, Name: "default"}))
	a.Eventually("the team's Sync is Ready", syncReady(cl, client.ObjectKeyFromObject(teamSync)))
	var cm corev1.ConfigMap
	if err := cl.Get(ctx, client.ObjectKey{Namespace: team, Name: "app"}, &cm); err != nil || cm.Data["greeting"] != "hello" || cm.Data["token"] != "s3cret" {
		t.Fatalf("the team's ConfigMap = %v (%v), want greeting from the ConfigMap and token from the Secret", cm.Data, err)
	}

	// A hand edit is seen by the agent's watch and reverted as the team.
	cm.Data["greeting"] = "edited"
	if err := cl.Update(ctx, &cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	a.Eventually("the edit is reverted", func() string {
		var got corev1.ConfigMap
		if err := cl.Get(ctx, client.ObjectKeyFromObject(&cm), &got); err != nil {
			return err.Error()
		}
		if got.Data["greeting"] != "hello" {
			return "greeting = " + got.Data["greeting"]
		}
		return ""
	})
	a.Eventually("the agent holds its Lease and recorded events", func() string {
		var lease coordinationv1.Lease
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "driftless-agent"}, &lease); err != nil {
			return "lease: " + err.Error()
		}
		var events eventsv1.EventList
		if err := cl.List(ctx, &events, client.InNamespace(team)); err != nil {
			return err.Error()
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == v1alpha1.SyncKind && e.Reason == v1alpha1.ReasonDriftReverted {
				return ""
			}
		}
		return fmt.Sprintf("no DriftReverted event on the team's Sync among %d", len(events.Items))
	})
	var policies metav1.PartialObjectMetadataList
	policies.SetGroupVersionKind(schema.FromAPIVersionAndKind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyList"))
	if err := cl.List(ctx, &policies); err != nil || len(policies.Items) == 0 {
		t.Errorf("the admission policy for Sync names was not installed: %v", err)
	}
}

// installRBAC creates config/rbac's objects with the namespace ns in
// place of driftless-system.
func installRBAC(t *testing.T, cl client.Client, ns string) {
	t.Helper()
	installRBACOf(t, cl, ns, "default")
}

// installRBACOf is installRBAC of the kustomization config/dir.
func installRBACOf(t *testing.T, cl client.Client, ns, dir string) {
	t.Helper()
	for _, o := range buildDir(t, dir) {
		obj, ok := o.(client.Object)
		if !ok {
			continue
		}
		switch b := obj.(type) {
		case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.Role:
		case *rbacv1.ClusterRoleBinding:
			for i := range b.Subjects {
				b.Subjects[i].Namespace = ns
			}
		case *rbacv1.RoleBinding:
			for i := range b.Subjects {
				b.Subjects[i].Namespace = ns
			}
		default:
			continue
		}
		if obj.GetNamespace() != "" {
			obj.SetNamespace(ns)
		} else {
			// Cluster-scoped: named per test, so reruns do not collide.
			obj.SetName(obj.GetName() + "-" + ns)
			if b, ok := obj.(*rbacv1.ClusterRoleBinding); ok && (b.RoleRef.Name == "driftless-manager" || b.RoleRef.Name == "driftless-dashboard") {
				b.RoleRef.Name += "-" + ns
			}
		}
		obj.SetResourceVersion("")
		mustCreate(t, cl, obj)
		t.Cleanup(func() {
			if obj.GetNamespace() == "" {
				_ = cl.Delete(context.Background(), obj)
			}
		})
	}
}

func mustCreate(t *testing.T, cl client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := cl.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// impersonating is the test cluster's admin config acting as user.
func impersonating(user string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

func syncClient(t *testing.T) client.Client {
	t.Helper()
	scheme := testenv.Scheme()
	cl, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func syncReady(cl client.Client, key client.ObjectKey) func() string {
	return func() string {
		var s v1alpha1.Sync
		if err := cl.Get(context.Background(), key, &s); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Ready = %+v", c)
		}
		return ""
	}
}
