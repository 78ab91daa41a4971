package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// reconcileInBackground runs `driftless reconcile KEY --wait` with args
// and returns, once the request is on the Sync, a function that waits
// for its result.
func reconcileInBackground(t *testing.T, key client.ObjectKey, args ...string) func() cliResult {
	t.Helper()
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, append([]string{"reconcile", key.String(), "--wait", "--timeout", "2m"}, args...)...)
	}()
	testenv.Eventually(t, 30*time.Second, "the request on the Sync", func() string {
		var s v1alpha1.Sync
		if err := c.Get(context.Background(), key, &s); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Annotations["driftless.dev/requested-at"]; !ok {
			return "no driftless.dev/requested-at annotation"
		}
		return ""
	})
	return func() cliResult {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(90 * time.Second):
			t.Fatal("reconcile --wait still waits 90s later")
		}
		return cliResult{}
	}
}

func TestReconcileWaitStopsWhenTheSyncStallsAndSaysWhy(t *testing.T) {
	key := createSyncWithStatus(t, env.Namespace(t), "stalls", false, v1alpha1.SyncStatus{})
	result := reconcileInBackground(t, key, "--kubeconfig", env.ControlPlane.KubeconfigPath())

	ctx := context.Background()
	var s v1alpha1.Sync
	if err := c.Get(ctx, key, &s); err != nil {
		t.Fatal(err)
	}
	s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonInvalidSpec, Message: "spec.paths[0] escapes the repository", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	r := result().expect(t, 1)
	for _, want := range []string{"Stalled: " + v1alpha1.ReasonInvalidSpec, "spec.paths[0] escapes the repository"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("the error lacks %q: %s", want, r.errOut)
		}
	}
}

func TestReconcileWaitStopsWithExitTwoWhenItMayNoLongerReadTheSync(t *testing.T) {
	ns := env.Namespace(t)
	key := createSyncWithStatus(t, ns, "forbidden", false, v1alpha1.SyncStatus{})
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sync-requester"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"syncs"}, Verbs: []string{"get", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sync-requester"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "requester"}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(env.ControlPlane.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "requester"
	}
	requester := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, requester); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(requester, 0o600); err != nil {
		t.Fatal(err)
	}

	result := reconcileInBackground(t, key, "--kubeconfig", requester)
	if err := c.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	r := result().expect(t, 2)
	if !strings.Contains(r.errOut, "no longer lets you read it") || strings.Count(strings.TrimSpace(r.errOut), "\n") > 1 {
		t.Errorf("the error does not say, in a line or two, that the Sync can no longer be read: %s", r.errOut)
	}
}
