package image

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/policy"
	"github.com/driftless/driftless/internal/testenv"
)

func newPolicyReconciler() *PolicyReconciler {
	opts := policy.DefaultScanOptions()
	opts.RetryDelay, opts.Retries = time.Millisecond, 1
	return &PolicyReconciler{Client: c, Reader: c, Scanner: policy.NewScanner(opts), Recorder: recorder}
}

func createPolicy(t *testing.T, ns, name string, spec v1alpha1.ImagePolicySpec) {
	t.Helper()
	p := &v1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func reconcilePolicy(t *testing.T, r *PolicyReconciler, ns, name string) (*v1alpha1.ImagePolicy, ctrl.Result) {
	t.Helper()
	key := client.ObjectKey{Namespace: ns, Name: name}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var p v1alpha1.ImagePolicy
	if err := c.Get(context.Background(), key, &p); err != nil {
		t.Fatal(err)
	}
	return &p, res
}

func semver(image, r string) v1alpha1.ImagePolicySpec {
	return v1alpha1.ImagePolicySpec{Image: image, Insecure: true,
		Policy: v1alpha1.ImagePolicyChoice{SemVer: &v1alpha1.SemVerPolicy{Range: r}}}
}

func TestImagePolicySelectsTheLatestTagAndItsDigest(t *testing.T) {
	ns := env.Namespace(t)
	reg := testenv.NewRegistry(t)
	reg.Push(t, "app", "1.2.2")
	reg.Push(t, "app", "latest")
	want := reg.Push(t, "app", "1.2.3")
	reg.Push(t, "app", "2.0.0")
	createPolicy(t, ns, "app", semver(reg.Host()+"/app", "~1.2"))

	r := newPolicyReconciler()
	p, res := reconcilePolicy(t, r, ns, "app")
	if p.Status.LatestTag != "1.2.3" || p.Status.LatestDigest != want {
		t.Errorf("latest = %s@%s, want 1.2.3@%s", p.Status.LatestTag, p.Status.LatestDigest, want)
	}
	if p.Status.TagsConsidered != 4 || p.Status.TagsSkipped != 1 {
		t.Errorf("considered %d skipped %d, want 4 and 1 (latest)", p.Status.TagsConsidered, p.Status.TagsSkipped)
	}
	if p.Status.SeenAt == nil || p.Status.LastScan == nil {
		t.Errorf("seenAt %v lastScan %v, want both set", p.Status.SeenAt, p.Status.LastScan)
	}
	if !apimeta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready=True", p.Status.Conditions)
	}
	if res.RequeueAfter != DefaultInterval {
		t.Errorf("requeue after %s, want the default interval %s", res.RequeueAfter, DefaultInterval)
	}
	eventFor(t, v1alpha1.ImagePolicyKind, ns, "app", "selected "+reg.Host()+"/app:1.2.3")

	// A newer tag in range is selected at the next scan; seenAt moves.
	seen := p.Status.SeenAt.Time
	reg.Push(t, "app", "1.2.10")
	r.Now = func() time.Time { return seen.Add(time.Hour) }
	p, _ = reconcilePolicy(t, r, ns, "app")
	if p.Status.LatestTag != "1.2.10" {
		t.Errorf("after pushing 1.2.10, latest = %s", p.Status.LatestTag)
	}
	if !p.Status.SeenAt.After(seen) {
		t.Errorf("seenAt %s did not move past %s for the new tag", p.Status.SeenAt, seen)
	}
}

func TestImagePolicyFailures(t *testing.T) {
	reg := testenv.NewRegistry(t)
	reg.Push(t, "app", "1.0.0")
	tests := []struct {
		name        string
		spec        func(host string) v1alpha1.ImagePolicySpec
		secret      map[string][]byte
		reason      string
		wantMessage string
		stalled     bool
	}{
		{
			name:        "a range matching no tag says so",
			spec:        func(h string) v1alpha1.ImagePolicySpec { return semver(h+"/app", ">=2") },
			reason:      v1alpha1.ReasonNoMatchingTag,
			wantMessage: `matches the range ">=2"`,
		},
		{
			name:        "an unreachable registry is a scan failure",
			spec:        func(string) v1alpha1.ImagePolicySpec { return semver("127.0.0.1:1/app", "^1") },
			reason:      v1alpha1.ReasonScanFailed,
			wantMessage: "127.0.0.1:1",
		},
		{
			name:        "a repository that does not exist is a scan failure naming spec.image",
			spec:        func(h string) v1alpha1.ImagePolicySpec { return semver(h+"/nope", "^1") },
			reason:      v1alpha1.ReasonScanFailed,
			wantMessage: "spec.image",
		},
		{
			name:        "an invalid range stalls until the spec changes",
			spec:        func(h string) v1alpha1.ImagePolicySpec { return semver(h+"/app", "one point oh") },
			reason:      v1alpha1.ReasonInvalidSpec,
			wantMessage: "spec.policy.semver.range",
			stalled:     true,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			name := "p" + string(rune('a'+i))
			createPolicy(t, ns, name, tt.spec(reg.Host()))
			p, res := reconcilePolicy(t, newPolicyReconciler(), ns, name)
			ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tt.reason {
				t.Fatalf("Ready = %+v, want False/%s", ready, tt.reason)
			}
			if !strings.Contains(ready.Message, tt.wantMessage) {
				t.Errorf("message %q lacks %q", ready.Message, tt.wantMessage)
			}
			if got := apimeta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionStalled); got != tt.stalled {
				t.Errorf("Stalled = %v, want %v", got, tt.stalled)
			}
			if tt.stalled != (res.RequeueAfter == 0) {
				t.Errorf("requeue after %s; a stalled policy waits for its spec, others retry", res.RequeueAfter)
			}
			eventFor(t, v1alpha1.ImagePolicyKind, ns, name, tt.wantMessage)
		})
	}
}

func TestImagePolicyWithWrongCredentialsSaysSoWithoutShowingThem(t *testing.T) {
	ns := env.Namespace(t)
	reg := testenv.NewRegistry(t)
	reg.RequireAuth("robot", "right-password")
	reg.Push(t, "app", "1.0.0")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Data: map[string][]byte{"username": []byte("robot"), "password": []byte("wrong-password")}}
	if err := c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	spec := semver(reg.Host()+"/app", "^1")
	spec.SecretRef = &v1alpha1.LocalObjectReference{Name: "creds"}
	createPolicy(t, ns, "app", spec)

	r := newPolicyReconciler()
	p, _ := reconcilePolicy(t, r, ns, "app")
	ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Reason != v1alpha1.ReasonScanFailed || !strings.Contains(ready.Message, "refused the credentials") {
		t.Fatalf("Ready = %+v, want ScanFailed saying the credentials were refused", ready)
	}
	if strings.Contains(ready.Message, "wrong-password") {
		t.Errorf("the condition shows the password: %s", ready.Message)
	}
	eventFor(t, v1alpha1.ImagePolicyKind, ns, "app", "refused the credentials")

	secret.Data["password"] = []byte("right-password")
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	p, _ = reconcilePolicy(t, r, ns, "app")
	if p.Status.LatestTag != "1.0.0" || !apimeta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("with the right password: latest %q conditions %+v, want 1.0.0 and Ready", p.Status.LatestTag, p.Status.Conditions)
	}
}
