package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/testenv"
)

func TestDiffOfASyncThatVerifiesCommitsRefusesAnUnsignedRevision(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	key := testenv.NewSSHSigningKey(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trusted-keys", Namespace: ns},
		Data: map[string][]byte{source.AllowedSignersKey: []byte(key.AllowedSigner + "\n")}}
	if err := cl.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.SignedCommit(t, key, "signed", map[string]string{"workloads/config.yaml": diffConfigMap("", "web-config", "v1")})
	syncKey := diffCreateSync(t, cl, ns, repo.FileURL())
	var s v1alpha1.Sync
	if err := cl.Get(context.Background(), syncKey, &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Source.Git.Verify = &v1alpha1.GitVerification{Mode: v1alpha1.VerifyHEAD, SecretRef: v1alpha1.LocalObjectReference{Name: "trusted-keys"}}
	if err := cl.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.ControlPlane.KubeconfigPath()

	r := runDiffCommand(t, "--sync", syncKey.String(), "--kubeconfig", kubeconfig).expect(t, 1)
	if !strings.Contains(r.out, "+ ConfigMap/"+ns+"/web-config") {
		t.Errorf("the signed revision's diff lacks the ConfigMap:\n%s", r.out)
	}

	unsigned := repo.Commit(t, "unsigned", map[string]string{"workloads/config.yaml": diffConfigMap("", "web-config", "v2")})
	r = runDiffCommand(t, "--sync", syncKey.String(), "--kubeconfig", kubeconfig).expect(t, 2)
	if want := "commit " + source.Short(unsigned) + " is not signed"; !strings.Contains(r.errOut, want) {
		t.Errorf("error lacks %q:\n%s", want, r.errOut)
	}
	if strings.Contains(r.out, "v2") {
		t.Errorf("the unsigned revision was rendered:\n%s", r.out)
	}
}
