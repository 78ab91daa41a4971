package crd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/config/crd"
)

func TestAPolicyRefusesASyncWhoseNamespaceAndNameDoNotFitALabel(t *testing.T) {
	c := installSyncCRD(t)
	policies, err := crd.SyncPolicies()
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 2 {
		t.Fatalf("got %d policy objects, want a policy and its binding", len(policies))
	}
	for _, p := range policies {
		if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(p), client.FieldOwner("driftless"), client.ForceOwnership); err != nil {
			t.Fatalf("install %s: %v", p.GetKind(), err)
		}
		// The other tests of this control plane make Syncs of their own.
		t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	}
	ns := env.Namespace(t)
	// 63 characters in all fit; 64 do not.
	fits := strings.Repeat("a", 63-len(ns)-1)
	long := fits + "b"
	var refused error
	// The API server picks up a new policy within a second or so.
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		refused = c.Create(ctx, newSync(ns, long))
		if refused == nil {
			_ = c.Delete(ctx, newSync(ns, long))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("a Sync %s/%s (64 characters) was accepted", ns, long)
	}
	for _, want := range []string{"64 characters", "driftless.dev/sync=<namespace>.<name>", "choose a shorter name"} {
		if !strings.Contains(refused.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, refused)
		}
	}
	if err := c.Create(context.Background(), newSync(ns, fits)); err != nil {
		t.Errorf("a Sync of exactly 63 characters was refused: %v", err)
	}
}
