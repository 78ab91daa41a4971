package controller

import (
	"context"
	"strings"
	"testing"

	"filippo.io/age"
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

// A Flux v2 user's setup: files the sops CLI encrypted with AWS KMS (an
// emulator here), and AWS credentials in the decryption Secret.
func TestFilesEncryptedWithAWSKMSApplyWithTheSecretsCredentialsAndNotWithout(t *testing.T) {
	h := newHarness(t)
	kms := testenv.NewLocalKMS(t)
	// The AWS SDK's endpoint override, which the agent honours as the
	// sops CLI does (docs/secrets.md).
	t.Setenv("AWS_ENDPOINT_URL_KMS", kms.Endpoint)
	encrypt := func(plain string) string {
		return testenv.SopsEncrypt(t, "db.yaml", plain, []string{"AWS_ACCESS_KEY_ID=AKIDLOCALKMS", "AWS_SECRET_ACCESS_KEY=x"},
			"--kms", kms.KeyARN, "--encrypted-regex", secrets.SecretFields)
	}
	h.keySecret("sops-aws", map[string][]byte{"sops.aws-kms": []byte("aws_access_key_id: AKIDLOCALKMS\naws_secret_access_key: " + leakMarker + "\n")})
	h.repo.Commit(t, "kms", map[string]string{"apps/db.yaml": encrypt(dbSecret(leakMarker))})
	h.createSync("shop", func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"apps"}
		s.Spec.Decryption = &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: "sops-aws"}}
	})
	h.expectReady(h.reconcile("shop"))
	h.expectPassword(leakMarker)

	// The same files, and a Secret without AWS credentials: the agent's
	// own environment is not used for a Sync's files.
	h.keySecret("sops-age-only", map[string][]byte{"a.agekey": []byte(mustAgeIdentity(t))})
	h.setSpec("shop", func(s *v1alpha1.Sync) { s.Spec.Decryption.SecretRef.Name = "sops-age-only" })
	h.repo.Commit(t, "kms 2", map[string]string{"apps/db.yaml": encrypt(dbSecret(leakMarker + "-2"))})
	s := h.reconcile("shop")
	h.expectFailed(s, v1alpha1.ReasonBuildFailed,
		"apps/db.yaml: is encrypted for AWS KMS key "+kms.KeyARN+", and the key Secret has no sops.aws-kms entry")
	h.expectPassword(leakMarker)
	if strings.Contains(ready(s).Message, leakMarker) {
		t.Errorf("the condition quotes a credential or a value: %s", ready(s).Message)
	}
}

func mustAgeIdentity(t *testing.T) string {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}
