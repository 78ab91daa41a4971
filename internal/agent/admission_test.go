package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/admission"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/testenv"
)

// startAdmissionAgent runs an agent with the admission webhook registered
// at a loopback URL, and removes the registration when the test ends;
// breakGlass sets the group that may edit protected objects.
func startAdmissionAgent(t *testing.T, ns string, breakGlass string) *agenttest.Agent {
	t.Helper()
	addr := loopbackAddr(t)
	o := agenttest.Options(t, env.Config, ns)
	o.Admission = true
	o.AdmissionAddr = addr
	o.AdmissionURL = "https://" + addr + admission.Path
	o.AdmissionBreakGlassGroup = breakGlass
	a := agenttest.Start(t, o)
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: admission.ConfigurationName(ns)}})
		_ = c.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: admission.ConfigurationName(ns)}})
	})
	a.Eventually("the webhook is registered with a CA bundle", func() string {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := c.Get(context.Background(), client.ObjectKey{Name: admission.ConfigurationName(ns)}, &vwc); err != nil {
			return err.Error()
		}
		if len(vwc.Webhooks) == 0 || len(vwc.Webhooks[0].ClientConfig.CABundle) == 0 {
			return "no CA bundle"
		}
		return ""
	})
	return a
}

// createAppsSync creates the Sync apps of ns, of repo's apps directory,
// changed by mutate when it is not nil, and waits until a has applied rev.
func createAppsSync(t *testing.T, a *agenttest.Agent, ns string, repo *testenv.Repo, rev string, mutate func(*v1alpha1.Sync)) *v1alpha1.Sync {
	t.Helper()
	sync := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:   v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.FileURL(), Branch: "main"}},
			Paths:    []string{"apps"},
			Interval: metav1.Duration{Duration: time.Hour},
		},
	}
	if mutate != nil {
		mutate(sync)
	}
	if err := c.Create(context.Background(), sync); err != nil {
		t.Fatal(err)
	}
	a.Eventually("the Sync is applied", agenttest.AppliedAt(c, client.ObjectKeyFromObject(sync), rev))
	return sync
}

// A person editing, patching or scaling an object a Sync manages with the
// real kubectl is told by kubectl where in git to change it and that the
// change will be reverted; a protected object refuses the edit except for
// the break-glass group; unmanaged objects and the agent's own writes get
// nothing.
func TestAdmissionWarnsTheHandEditorThroughKubectl(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	locked := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: locked\n  namespace: %s\n  annotations:\n    driftless.dev/protect: deny\ndata:\n  greeting: \"v1\"\n", ns)
	rev := repo.Commit(t, "first", map[string]string{
		"apps/app.yaml":    agenttest.ConfigMap(ns, "app", "v1"),
		"apps/web.yaml":    agenttest.Deployment(ns, "web"),
		"apps/locked.yaml": locked,
	})
	a := startAdmissionAgent(t, ns, "driftless:break-glass")
	sync := createAppsSync(t, a, ns, repo, rev, nil)
	if err := c.Create(ctx, mustConfigMap(ns, "unmanaged")); err != nil {
		t.Fatal(err)
	}
	reverted := fmt.Sprintf("Warning: managed by driftless %s/apps from apps/%%s; this change will be reverted — change it in git", ns)

	t.Run("kubectl patch prints the warning and succeeds", func(t *testing.T) {
		_, stderr, err := kubectl(t, nil, "-n", ns, "patch", "configmap", "app", "-p", `{"data":{"greeting":"by hand"}}`)
		if err != nil {
			t.Fatalf("kubectl patch failed: %v: %s", err, stderr)
		}
		t.Logf("kubectl printed: %s", stderr)
		if want := fmt.Sprintf(reverted, "app.yaml"); !strings.Contains(stderr, want) {
			t.Errorf("kubectl printed %q, want %q", stderr, want)
		}
	})
	t.Run("kubectl edit prints the warning and succeeds", func(t *testing.T) {
		editor := filepath.Join(t.TempDir(), "editor.sh")
		if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/greeting: .*/greeting: edited/' \"$1\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := kubectl(t, []string{"KUBE_EDITOR=" + editor}, "-n", ns, "edit", "configmap", "app")
		if err != nil {
			t.Fatalf("kubectl edit failed: %v: %s", err, stderr)
		}
		if want := fmt.Sprintf(reverted, "app.yaml"); !strings.Contains(stderr, want) {
			t.Errorf("kubectl printed %q, want %q", stderr, want)
		}
	})
	t.Run("kubectl scale prints the warning and succeeds", func(t *testing.T) {
		_, stderr, err := kubectl(t, nil, "-n", ns, "scale", "deployment", "web", "--replicas=2")
		if err != nil {
			t.Fatalf("kubectl scale failed: %v: %s", err, stderr)
		}
		t.Logf("kubectl printed: %s", stderr)
		if want := fmt.Sprintf(reverted, "web.yaml"); !strings.Contains(stderr, want) {
			t.Errorf("kubectl printed %q, want %q", stderr, want)
		}
	})
	t.Run("an unmanaged object gets no warning", func(t *testing.T) {
		_, stderr, err := kubectl(t, nil, "-n", ns, "patch", "configmap", "unmanaged", "-p", `{"data":{"greeting":"by hand"}}`)
		if err != nil || strings.Contains(stderr, "Warning") {
			t.Errorf("kubectl patch of an unmanaged object: err %v, stderr %q; want success and no warning", err, stderr)
		}
	})
	t.Run("a protected object refuses the edit and says why", func(t *testing.T) {
		_, stderr, err := kubectl(t, nil, "-n", ns, "patch", "configmap", "locked", "-p", `{"data":{"greeting":"by hand"}}`)
		if err == nil {
			t.Fatalf("kubectl patch of a protected object succeeded; stderr %q", stderr)
		}
		t.Logf("kubectl printed: %s", stderr)
		for _, want := range []string{"denied the request", "ConfigMap " + ns + "/locked is protected by driftless (driftless.dev/protect=deny)",
			"managed by driftless " + ns + "/apps from apps/locked.yaml — change it in git, or as a member of the break-glass group driftless:break-glass"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("kubectl printed %q, want it to contain %q", stderr, want)
			}
		}
		if got := agenttest.Greeting(t, c, ns, "locked"); got != "v1" {
			t.Errorf("greeting = %q after a refused edit, want v1", got)
		}
	})
	t.Run("the break-glass group may edit a protected object, and the agent reverts it", func(t *testing.T) {
		_, stderr, err := kubectl(t, nil, "--as", "oncall", "--as-group", "driftless:break-glass", "--as-group", "system:masters",
			"-n", ns, "patch", "configmap", "locked", "-p", `{"data":{"greeting":"break glass"}}`)
		if err != nil {
			t.Fatalf("break-glass kubectl patch failed: %v: %s", err, stderr)
		}
		if !strings.Contains(stderr, "allowed for break-glass group driftless:break-glass") {
			t.Errorf("kubectl printed %q, want the break-glass warning", stderr)
		}
		// The agent's own revert of a protected object is not refused.
		a.Eventually("the agent reverts the protected object", func() string {
			if got := agenttest.Greeting(t, c, ns, "locked"); got != "v1" {
				return "greeting = " + got
			}
			return ""
		})
	})
	// The agent here runs as the admin user the kubeconfig names, and a
	// delete names no field manager: people delete as someone else.
	person := []string{"--as", "alice", "--as-group", "system:masters"}
	t.Run("kubectl delete of a managed object prints the warning, succeeds, and the agent re-creates it", func(t *testing.T) {
		_, stderr, err := kubectl(t, nil, append(person, "-n", ns, "delete", "configmap", "app")...)
		if err != nil {
			t.Fatalf("kubectl delete failed: %v: %s", err, stderr)
		}
		t.Logf("kubectl printed: %s", stderr)
		if want := fmt.Sprintf("Warning: managed by driftless %s/apps from apps/app.yaml; it will be re-created — delete it in git", ns); !strings.Contains(stderr, want) {
			t.Errorf("kubectl printed %q, want %q", stderr, want)
		}
		a.Eventually("the agent re-creates the deleted object", func() string {
			if got := agenttest.Greeting(t, c, ns, "app"); got != "v1" {
				return "greeting = " + got
			}
			return ""
		})
	})
	t.Run("kubectl delete of a protected object is refused and says to delete it in git", func(t *testing.T) {
		_, stderr, err := kubectl(t, nil, append(person, "-n", ns, "delete", "configmap", "locked")...)
		if err == nil {
			t.Fatalf("kubectl delete of a protected object succeeded; stderr %q", stderr)
		}
		t.Logf("kubectl printed: %s", stderr)
		for _, want := range []string{"denied the request", "ConfigMap " + ns + "/locked is protected by driftless (driftless.dev/protect=deny)",
			"managed by driftless " + ns + "/apps from apps/locked.yaml — delete it in git, or as a member of the break-glass group driftless:break-glass"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("kubectl printed %q, want it to contain %q", stderr, want)
			}
		}
		if got := agenttest.Greeting(t, c, ns, "locked"); got != "v1" {
			t.Errorf("greeting = %q after a refused delete, want v1", got)
		}
	})
	t.Run("the agent prunes a protected object deleted from git", func(t *testing.T) {
		rev := repo.Commit(t, "drop locked", map[string]string{"apps/locked.yaml": ""})
		reconcile(t, ns+"/apps")
		a.Eventually("the Sync is applied", agenttest.AppliedAt(c, client.ObjectKeyFromObject(sync), rev))
		if got := agenttest.Greeting(t, c, ns, "locked"); got != "" {
			t.Errorf("the protected object removed from git is still there (greeting %q): the webhook refused the agent's prune", got)
		}
	})
	t.Run("a suspended Sync's warning says the change stays but differs from git", func(t *testing.T) {
		patch := client.MergeFrom(sync.DeepCopy())
		sync.Spec.Suspend = true
		if err := c.Patch(ctx, sync, patch); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("Warning: managed by driftless %s/apps from apps/app.yaml; this change will not be reverted (the Sync is suspended) but differs from git — change it in git", ns)
		n := 0
		a.Eventually("the warning says not reverted", func() string {
			n++
			_, stderr, err := kubectl(t, nil, "-n", ns, "patch", "configmap", "app", "-p", fmt.Sprintf(`{"data":{"greeting":"by hand %d"}}`, n))
			if err != nil {
				return err.Error() + ": " + stderr
			}
			if !strings.Contains(stderr, want) {
				return "kubectl printed " + stderr
			}
			return ""
		})
	})
}

// A Sync that acts as a ServiceAccount (as the root Sync of `driftless
// install` acts as driftless-root) has its objects written and pruned by
// the agent as that ServiceAccount: the webhook lets those writes through
// on a protected object, as it does the agent's own, but not the same
// writes made with the ServiceAccount's own token.
func TestAdmissionLetsTheAgentActAsTheSyncsServiceAccount(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	locked := func(greeting string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: locked\n  namespace: %s\n  annotations:\n    driftless.dev/protect: deny\ndata:\n  greeting: %q\n", ns, greeting)
	}
	rev := repo.Commit(t, "first", map[string]string{"apps/locked.yaml": locked("v1"), "apps/app.yaml": agenttest.ConfigMap(ns, "app", "v1")})
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "syncer"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "syncer-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), binding) })
	a := startAdmissionAgent(t, ns, "")
	sync := createAppsSync(t, a, ns, repo, rev, func(s *v1alpha1.Sync) { s.Spec.ServiceAccountName = sa.Name })
	if _, stderr, err := kubectl(t, nil, "-n", ns, "patch", "configmap", "locked", "-p", `{"data":{"greeting":"by hand"}}`); err == nil {
		t.Fatalf("a person's patch of the protected object succeeded: %s", stderr)
	}

	// The ServiceAccount's own token (kubectl create token) is not the
	// agent: it may neither write the protected object as field manager
	// driftless nor delete it.
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	tokenCfg := rest.AnonymousClientConfig(env.Config)
	tokenCfg.BearerToken = tr.Status.Token
	asSA, err := client.New(tokenCfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := asSA.Get(ctx, client.ObjectKey{Namespace: ns, Name: "locked"}, cm); err != nil {
		t.Fatalf("the ServiceAccount's token cannot read the object (want it to, so that only the webhook refuses): %v", err)
	}
	edited := cm.DeepCopy()
	edited.Data["greeting"] = "with the ServiceAccount's token"
	if err := asSA.Patch(ctx, edited, client.MergeFrom(cm), client.FieldOwner("driftless")); err == nil || !strings.Contains(err.Error(), "is protected by driftless") {
		t.Errorf("a patch of the protected object with the ServiceAccount's own token and field manager driftless: %v, want it refused as protected", err)
	}
	if err := asSA.Delete(ctx, cm); err == nil || !strings.Contains(err.Error(), "is protected by driftless") {
		t.Errorf("a delete of the protected object with the ServiceAccount's own token: %v, want it refused as protected", err)
	}
	if got := agenttest.Greeting(t, c, ns, "locked"); got != "v1" {
		t.Errorf("greeting = %q after the ServiceAccount's token tried to change and delete it, want v1", got)
	}

	rev = repo.Commit(t, "change", map[string]string{"apps/locked.yaml": locked("v2")})
	reconcile(t, ns+"/apps")
	a.Eventually("the Sync is applied", agenttest.AppliedAt(c, client.ObjectKeyFromObject(sync), rev))
	if got := agenttest.Greeting(t, c, ns, "locked"); got != "v2" {
		t.Errorf("greeting = %q after a commit changed it to v2: the webhook refused the agent's apply as the Sync's ServiceAccount", got)
	}
	rev = repo.Commit(t, "drop", map[string]string{"apps/locked.yaml": ""})
	reconcile(t, ns+"/apps")
	a.Eventually("the Sync is applied", agenttest.AppliedAt(c, client.ObjectKeyFromObject(sync), rev))
	if got := agenttest.Greeting(t, c, ns, "locked"); got != "" {
		t.Errorf("the protected object removed from git is still there (greeting %q): the webhook refused the agent's prune as the Sync's ServiceAccount", got)
	}
}

func mustConfigMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"greeting": "v1"}}
}

// A hold names the user the API server saw write it, not whom it claims:
// alice, who may patch Syncs, holds one writing "by": "bob"; the stored
// hold, status.hold and the Ready message say alice.
func TestAHoldNamesTheUserWhoWroteItNotWhomItClaims(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	rev := repo.Commit(t, "first", map[string]string{"apps/app.yaml": agenttest.ConfigMap(ns, "app", "v1")})
	a := startAdmissionAgent(t, ns, "")
	sync := createAppsSync(t, a, ns, repo, rev, nil)

	// alice may hold: get and patch on syncs (docs/hold.md).
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "holder", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs"}, Verbs: []string{"get", "patch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "holder", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "holder"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	aliceConfig := rest.CopyConfig(env.Config)
	aliceConfig.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	alice, err := client.New(aliceConfig, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	claimed := v1alpha1.Hold{Revision: rev, Reason: "payment errors", By: "bob", At: time.Now().Add(-time.Hour)}
	apply := client.ApplyConfigurationFromUnstructured(v1alpha1.HoldApply(ns, "apps", &claimed, time.Now()))
	if err := alice.Apply(ctx, apply, client.FieldOwner(v1alpha1.HoldFieldManager), client.ForceOwnership); err != nil {
		t.Fatalf("alice holds the Sync: %v", err)
	}

	var stored v1alpha1.Sync
	if err := c.Get(ctx, client.ObjectKeyFromObject(sync), &stored); err != nil {
		t.Fatal(err)
	}
	h, err := v1alpha1.HoldOf(&stored)
	if err != nil || h == nil {
		t.Fatalf("the stored hold: %v, %v", h, err)
	}
	if h.By != "alice" || time.Since(h.At) > 10*time.Minute {
		t.Errorf("the stored hold says by %q at %s, want alice, now (she claimed bob, an hour ago)", h.By, h.At)
	}
	want := "held at " + rev[:7] + " by alice: payment errors"
	a.Eventually("the Sync says alice held it", func() string {
		var s v1alpha1.Sync
		if err := c.Get(ctx, client.ObjectKeyFromObject(sync), &s); err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || !strings.HasPrefix(ready.Message, want) || s.Status.Hold == nil || s.Status.Hold.By != "alice" {
			return fmt.Sprintf("Ready %+v, status.hold %+v; want a message starting %q and by alice", ready, s.Status.Hold, want)
		}
		return ""
	})
}
