package image

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	synccontroller "github.com/driftless/driftless/internal/controller"
)

// The image update of a Sync outside the agent's namespace reads the
// Sync's git Secret as the Sync's ServiceAccount, as the Sync controller
// does: without get on it nothing is fetched or reported pending, and the
// problem names the identity and the Secret; with get, the update runs.
func TestImageUpdateReadsATenantSyncsSecretsAsItsServiceAccount(t *testing.T) {
	ctx := context.Background()
	f := newUpdateFixture(t, markedApp, &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdateReport})
	f.r.AgentNamespace = "driftless-system"
	syncs := &synccontroller.SyncReconciler{Reader: c, Applier: c,
		Identities: synccontroller.NewIdentities(synccontroller.Tenancy{AgentNamespace: f.r.AgentNamespace}, c, env.Config,
			client.Options{Scheme: scheme, Mapper: c.RESTMapper()})}
	f.r.ReaderOf = syncs.ReaderOf
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	f.sync.Spec.ServiceAccountName = "deployer"
	if err := c.Update(ctx, f.sync); err != nil {
		t.Fatal(err)
	}

	u := f.reconcile(t).Status.ImageUpdate
	want := `serviceaccount ` + f.ns + `:deployer may not get secrets "git" in namespace ` + f.ns
	if u == nil || len(u.Pending) != 0 || len(u.Problems) != 1 || !strings.Contains(u.Problems[0], want) {
		t.Fatalf("status.imageUpdate = %+v, want nothing pending and a problem saying %q", u, want)
	}

	// Granted get on its git Secret, the account's update runs.
	mustCreate(t,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-git", Namespace: f.ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"git"}, Verbs: []string{"get"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-git", Namespace: f.ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-git"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: f.ns}}},
	)
	reader, err := syncs.ReaderOf(f.sync)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for apierrors.IsForbidden(reader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "git"}, &corev1.Secret{})) {
		if time.Now().After(deadline) {
			t.Fatal("the API server never applied the grant")
		}
		time.Sleep(100 * time.Millisecond)
	}
	u = f.reconcile(t).Status.ImageUpdate
	if u == nil || len(u.Pending) != 1 || len(u.Problems) != 0 {
		t.Errorf("with get granted, status.imageUpdate = %+v, want one pending change and no problem", u)
	}
}

func mustCreate(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}
