package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/internal/controller"
	"github.com/driftless/driftless/internal/receiver"
)

// The bench times a push from the POST on: a notice the receiver refused
// or that woke nothing would time an interval instead, so push must only
// succeed when the agent's receiver woke the bench's Sync.
func TestThePushNoticeWakesTheBenchSyncOnlyWhenSignedWithTheWebhookSecret(t *testing.T) {
	repo := &gitRepo{bare: "/tmp/driftless-bench-x/git-d1/fleet.git"}
	tests := []struct {
		name    string
		signKey string
		wantErr string
	}{
		{name: "a notice signed with the webhook Secret's github key wakes the Sync", signKey: "s3cret"},
		{name: "a notice signed with another key is refused and push says so", signKey: "other", wantErr: "401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sync := newSync("fleet-d1", repo.url(), 0, 0)
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: syncNamespace, Name: webhookSecretName},
				Data:       map[string][]byte{receiver.GitHub: []byte("s3cret")},
			}
			api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sync, secret).Build()
			wake := make(chan controller.WakeUp, 1)
			hooks, err := receiver.New(receiver.Options{
				Addr:    "127.0.0.1:0",
				Secret:  types.NamespacedName{Namespace: syncNamespace, Name: webhookSecretName},
				Syncs:   api,
				Secrets: api,
				Wake:    wake,
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(hooks)
			defer srv.Close()

			b := &bench{hookSecret: []byte(tt.signKey)}
			l := &live{agent: &agent{hooks: srv.URL}, sync: sync.Name, repo: repo}
			_, err = b.push(context.Background(), l, "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", 1)
			var woken []string
			select {
			case e := <-wake:
				woken = append(woken, e.Sync.Namespace+"/"+e.Sync.Name)
			default:
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("push: %v", err)
				}
				if len(woken) != 1 || woken[0] != syncNamespace+"/"+sync.Name {
					t.Fatalf("woken %v, want the bench's Sync", woken)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("push: error %v, want one that says %s", err, tt.wantErr)
			}
			if len(woken) != 0 {
				t.Fatalf("woken %v, want none", woken)
			}
		})
	}
}
