package controller

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

// remoteBaseFiles is a base, in a repository of its own: a Deployment that
// takes its environment from a generated ConfigMap.
func remoteBaseFiles(greeting string) map[string]string {
	return map[string]string{
		"base/kustomization.yaml": "resources: [deployment.yaml]\nconfigMapGenerator:\n- name: web-config\n  literals: [GREETING=" + greeting + "]\n",
		"base/deployment.yaml":    webDeployment,
	}
}

// greetingOf returns the GREETING of the ConfigMap the Deployment
// prod-web takes its environment from, and that ConfigMap's name.
func greetingOf(t *testing.T, ns string) (string, string) {
	t.Helper()
	deploy := get(t, "apps/v1", "Deployment", ns, "prod-web")
	if deploy == nil {
		t.Fatal("Deployment prod-web of the remote base not created")
	}
	name := configMapOf(t, deploy)
	cm := get(t, "v1", "ConfigMap", ns, name)
	if cm == nil {
		t.Fatalf("ConfigMap %s the Deployment names does not exist", name)
	}
	return cm.Object["data"].(map[string]any)["GREETING"].(string), name
}

// An overlay in the Sync's repository names a base in a second repository
// on the same git server, over SSH, with the branch main: with allowRemote
// it is fetched with the Sync's own credentials and built, a new commit of
// the base's branch is picked up at the next sync, and an unreachable base
// keeps the last good state. Without allowRemote it is refused.
func TestARemoteBaseIsFetchedWithAllowRemote(t *testing.T) {
	h := newHarness(t)
	bases := h.srv.NewRepo(t, "bases")
	bases.Commit(t, "base", remoteBaseFiles("hello"))
	url := bases.SSHURL() + "//base?ref=main"
	rev := h.repo.Commit(t, "overlay", map[string]string{
		"apps/web/kustomization.yaml": "namePrefix: prod-\nresources:\n- " + url + "\n",
	})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: h.ns},
		Data:       map[string][]byte{"identity": h.srv.DeployKey, "known_hosts": h.srv.KnownHosts()},
	}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.createSync("web", func(s *v1alpha1.Sync) {
		s.Spec.Source.Git.URL = h.repo.SSHURL()
		s.Spec.Source.Git.SecretRef = &v1alpha1.LocalObjectReference{Name: "git"}
		s.Spec.Paths = []string{"apps"}
	})

	// Without allowRemote: refused, naming the field, and nothing fetched.
	h.expectFailed(h.reconcile("web"), v1alpha1.ReasonBuildFailed,
		"apps/web/kustomization.yaml", url, "spec.kustomize.allowRemote is off")
	if get(t, "apps/v1", "Deployment", h.ns, "prod-web") != nil {
		t.Fatal("the remote base was built without allowRemote")
	}

	s := h.syncNow("web")
	s.Spec.Kustomize = &v1alpha1.KustomizeSpec{AllowRemote: true}
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h.expectReady(h.reconcile("web"))
	greeting, first := greetingOf(t, h.ns)
	if greeting != "hello" || !strings.HasPrefix(first, "prod-web-config-") {
		t.Errorf("the overlay's ConfigMap is %s with GREETING %q, want prod-web-config-<hash> with hello", first, greeting)
	}
	origin := get(t, "apps/v1", "Deployment", h.ns, "prod-web").GetAnnotations()[v1alpha1.OriginAnnotation]
	if want := "apps/web/kustomization.yaml → " + bases.SSHURL() + "//base/deployment.yaml?ref=main@" + rev[:7]; origin != want {
		t.Errorf("origin = %q, want %q", origin, want)
	}

	// The base's branch moves; the Sync's repository does not.
	bases.Commit(t, "new greeting", remoteBaseFiles("bonjour"))
	h.expectReady(h.reconcile("web"))
	if greeting, name := greetingOf(t, h.ns); greeting != "bonjour" || name == first {
		t.Errorf("after the base's branch moved: ConfigMap %s with GREETING %q, want a new hash with bonjour", name, greeting)
	}

	// The base's repository is gone: the build fails naming the
	// kustomization and the base, and the cluster keeps what it had.
	moved := bases.Bare + ".moved"
	if err := os.Rename(bases.Bare, moved); err != nil {
		t.Fatal(err)
	}
	h.expectFailed(h.reconcile("web"), v1alpha1.ReasonBuildFailed, "apps/web/kustomization.yaml", url, "cannot be fetched")
	if greeting, _ := greetingOf(t, h.ns); greeting != "bonjour" {
		t.Errorf("after a failed fetch the greeting is %q, want bonjour still", greeting)
	}
	if err := os.Rename(moved, bases.Bare); err != nil {
		t.Fatal(err)
	}
	h.expectReady(h.reconcile("web"))
}
