package engine

import (
	"context"
	"strings"
	"testing"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/api/v1alpha1"
)

func TestDecryptionKeysComeFromTheSyncOrTheAgentDefault(t *testing.T) {
	agentKey, _ := age.GenerateX25519Identity()
	shopKey, _ := age.GenerateX25519Identity()
	reader := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "driftless-system", Name: "sops-age"}, Data: map[string][]byte{"a.agekey": []byte(agentKey.String())}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "keys"}, Data: map[string][]byte{"a.agekey": []byte(shopKey.String())}},
	).Build()
	defaultKey := client.ObjectKey{Namespace: "driftless-system", Name: "sops-age"}
	sync := func(ns string, ref string) *v1alpha1.Sync {
		s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}
		if ref != "" {
			s.Spec.Decryption = &v1alpha1.Decryption{Provider: "sops", SecretRef: &v1alpha1.LocalObjectReference{Name: ref}}
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		sync      *v1alpha1.Sync
		recipient string // "" for no keys
		wantErr   string
	}{
		{"a Sync's secretRef gives its keys", sync("shop", "keys"), shopKey.Recipient().String(), ""},
		{"a Sync in the agent's namespace without one gets the default", sync("driftless-system", ""), agentKey.Recipient().String(), ""},
		{"a Sync elsewhere without one gets no keys", sync("shop", ""), "", ""},
		{"a missing key Secret is named", sync("shop", "gone"), "", "key Secret shop/gone of spec.decryption.secretRef does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := DecryptionKeys(context.Background(), reader, tc.sync, defaultKey)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.recipient == "" && keys != nil:
				t.Errorf("keys %v, want none", keys.Recipients())
			case tc.recipient != "" && (keys == nil || keys.Recipients()[0] != tc.recipient):
				t.Errorf("keys = %v, want %s", keys, tc.recipient)
			}
			if Decryptor(keys) == nil != (keys == nil) {
				t.Error("Decryptor(nil keys) must be a nil render.Decryptor")
			}
		})
	}
}
