package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/secrets"
	"github.com/driftless/driftless/internal/testenv"
)

// keySecret creates the Secret name in the harness's namespace with data.
func (h *harness) keySecret(name string, data map[string][]byte) {
	h.t.Helper()
	if err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns}, Data: data}); err != nil {
		h.t.Fatal(err)
	}
}

// expectPassword fails unless Secret db holds password.
func (h *harness) expectPassword(password string) {
	h.t.Helper()
	var db corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "db"}, &db); err != nil {
		h.t.Fatal(err)
	}
	if string(db.Data["password"]) != password {
		h.t.Fatalf("Secret db has password %q, want %q", db.Data["password"], password)
	}
}

func dbSecret(password string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + password + "\n"
}

// A Flux v1 user's setup: files the sops CLI encrypted for a gpg key, and
// that key's armored private key in the decryption Secret.
func TestFilesEncryptedForAPGPKeyApplyDecryptedAndAnotherKeyKeepsTheLastState(t *testing.T) {
	h := newHarness(t)
	ours := testenv.NewGPGEncryptionKey(t, "")
	theirs := testenv.NewGPGEncryptionKey(t, "")
	encrypt := func(key *testenv.GPGKey, plain string) string {
		return testenv.SopsEncrypt(t, "db.yaml", plain, []string{"GNUPGHOME=" + key.Home}, "--pgp", key.Fingerprint, "--encrypted-regex", secrets.SecretFields)
	}
	h.keySecret("sops-gpg", map[string][]byte{"sops.asc": []byte(ours.ArmoredPrivate)})
	rev := h.repo.Commit(t, "pgp", map[string]string{"apps/db.yaml": encrypt(ours, dbSecret(leakMarker))})
	h.createSync("shop", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"apps"}
		s.Spec.Decryption = &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-gpg"}}
	})
	s := h.reconcile("shop")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != rev {
		t.Fatalf("applied %s, want %s", s.Status.LastAppliedRevision, rev)
	}
	h.expectPassword(leakMarker)

	// Encrypted for a key the Secret lacks: refused, naming the file and
	// both keys; nothing of that revision applied.
	h.repo.Commit(t, "other key", map[string]string{
		"apps/db.yaml":  encrypt(theirs, dbSecret(leakMarker+"-2")),
		"apps/new.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n",
	})
	h.expectFailed(h.reconcile("shop"), v1alpha1.ReasonBuildFailed,
		"apps/db.yaml: is encrypted for PGP keys "+theirs.Fingerprint+", none of which the key Secret holds (it holds "+ours.Fingerprint+")")
	h.expectPassword(leakMarker)
	if get(t, "v1", "ConfigMap", h.ns, "new") != nil {
		t.Error("ConfigMap new of the refused revision was applied")
	}
}
