package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func TestDiffAgainstTheClusterSubstitutesVariablesAndMasksSecretOnes(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-vars", Namespace: ns},
		Data:       map[string][]byte{"token": []byte("t0ken-Value")},
	}); err != nil {
		t.Fatal(err)
	}
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	repo.Commit(t, "initial", map[string]string{
		"workloads/config.yaml": diffConfigMap("", "web-config", "${greeting}") + "  auth: Bearer ${token}\n",
	})
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: repo.FileURL(), Branch: "main"}},
			Paths:           []string{"workloads"},
			Interval:        metav1.Duration{Duration: time.Hour},
			TargetNamespace: ns,
			Substitute:      map[string]string{"greeting": "bonjour"},
			SubstituteFrom:  []v1alpha1.SubstituteReference{{Kind: "Secret", Name: "secret-vars"}},
		},
	}
	if err := cl.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	r := runDiffCommand(t, "--sync", ns+"/fleet", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 1)
	for _, want := range []string{"+  key: bonjour\n", "+  auth: Bearer ***\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "t0ken-Value") {
		t.Errorf("output shows the Secret's value:\n%s", r.out)
	}
}
