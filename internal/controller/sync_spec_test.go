package controller

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/driftless/driftless/api/v1alpha1"
)

// expectStalledOnSpec fails unless the reconcile of the named Sync asked
// for no retry and left it Ready=False and Stalled=True with reason
// InvalidSpec, its message containing every one of wants.
func (h *harness) expectStalledOnSpec(name string, wants ...string) *v1alpha1.Sync {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: keyOf(h.ns, name)})
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	if res != (ctrl.Result{}) {
		h.t.Errorf("reconcile asked for %+v; an invalid spec must wait for a spec change, not be retried", res)
	}
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), keyOf(h.ns, name), &s); err != nil {
		h.t.Fatal(err)
	}
	h.expectFailed(&s, v1alpha1.ReasonInvalidSpec, wants...)
	stalled := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1alpha1.ReasonInvalidSpec {
		h.t.Errorf("Stalled = %+v, want True with reason InvalidSpec", stalled)
	}
	return &s
}

func TestInvalidSpecStallsAndWaitsForTheSpecToChange(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(*v1alpha1.Sync)
		want   []string
	}{
		{
			name:   "a file URL with a host",
			break_: func(s *v1alpha1.Sync) { s.Spec.Source.Git.URL = "file://fileserver/srv/fleet.git" },
			want:   []string{`spec.source.git.url "file://fileserver/srv/fleet.git"`, "write file:///<absolute path> (three slashes)"},
		},
		{
			name: "a URL whose password must not show",
			break_: func(s *v1alpha1.Sync) {
				s.Spec.Source.Git.URL = "https://me:s3cret-token@github.com"
			},
			want: []string{"names no repository"},
		},
		{
			name:   "an SSH address without a deploy key",
			break_: func(s *v1alpha1.Sync) { s.Spec.Source.Git.URL = "git@github.com:example/fleet.git" },
			want:   []string{"SSH address, which needs a deploy key", "set spec.source.git.secretRef"},
		},
		{
			name:   "a branch name git cannot hold",
			break_: func(s *v1alpha1.Sync) { s.Spec.Source.Git.Branch = "main branch" },
			want:   []string{`branch "main branch" is not a valid git branch name`, "spec.source.git.branch"},
		},
		{
			name: "a health check expression that does not compile",
			break_: func(s *v1alpha1.Sync) {
				s.Spec.HealthChecks = []v1alpha1.HealthCheck{
					{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase == 'Running'"},
					{APIVersion: "example.com/v1", Kind: "Gadget", Current: "true", Failed: "status.phase =="}}
			},
			want: []string{"spec.healthChecks[1].failed: ERROR: <input>:1:16: Syntax error"},
		},
		{
			name: "a health check expression that costs too much",
			break_: func(s *v1alpha1.Sync) {
				s.Spec.HealthChecks = []v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget",
					Current: "status.conditions.all(a, status.conditions.all(b, a.type != b.type || a == b))"}}
			},
			want: []string{"spec.healthChecks[0].current: ", "is too costly", "avoid a comprehension (all, exists, filter, map) inside another"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.repo.Commit(t, "initial", map[string]string{"config.yaml": configMap("web-config", "v1")})
			h.createSync("fleet", tt.break_)
			s := h.expectStalledOnSpec("fleet", tt.want...)
			if strings.Contains(ready(s).Message, "s3cret-token") {
				t.Errorf("the Ready message shows the password of the URL: %s", ready(s).Message)
			}
			if get(t, "v1", "ConfigMap", h.ns, "web-config") != nil {
				t.Errorf("a Sync with an invalid spec applied an object")
			}
			eventsFor(t, h.ns, "fleet", tt.want[0])

			// Reconciled again at the same generation (a restart, a
			// dependency's change): nothing is written again.
			again := h.expectStalledOnSpec("fleet", tt.want...)
			if again.ResourceVersion != s.ResourceVersion {
				t.Errorf("a second reconcile of the same invalid spec rewrote the Sync (resourceVersion %s → %s)",
					s.ResourceVersion, again.ResourceVersion)
			}

			// The spec is fixed: the next reconcile (the new generation
			// triggers it) syncs.
			again.Spec.Source.Git.URL = h.repo.FileURL()
			again.Spec.Source.Git.Branch = "main"
			again.Spec.HealthChecks = nil
			if err := c.Update(context.Background(), again); err != nil {
				t.Fatal(err)
			}
			fixed := h.reconcile("fleet")
			h.expectReady(fixed)
			if meta.IsStatusConditionTrue(fixed.Status.Conditions, v1alpha1.ConditionStalled) {
				t.Errorf("still Stalled after the spec was fixed")
			}
			if get(t, "v1", "ConfigMap", h.ns, "web-config") == nil {
				t.Errorf("the fixed Sync did not apply web-config")
			}
		})
	}
}

func TestNamespaceAndNameTooLongForTheLabelStallBeforeAnyWrite(t *testing.T) {
	h := newHarness(t)
	h.repo.Commit(t, "initial", map[string]string{"config.yaml": configMap("web-config", "v1")})
	// "<namespace>.<name>" of 64 characters, one more than a label value.
	name := strings.Repeat("x", 63-len(h.ns))
	if len(name) > 61 {
		t.Fatalf("namespace %s is too short for this test", h.ns)
	}
	h.createSync(name, nil)
	h.expectStalledOnSpec(name, "64 characters long", "over the 63 a label value allows",
		"recreate the Sync with a name of at most "+strconv.Itoa(len(name)-1)+" characters")
	if get(t, "v1", "ConfigMap", h.ns, "web-config") != nil {
		t.Errorf("a Sync whose label value cannot be written applied an object")
	}
}

// A health check is the same whatever the source: an OCI Sync's that
// does not compile stalls it as a git Sync's does.
func TestCheckSpecRefusesAnOCISyncsHealthCheckThatDoesNotCompile(t *testing.T) {
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{OCI: &v1alpha1.OCISource{URL: "oci://registry.example/team-a/apps"}},
			HealthChecks: []v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase =="}}}}
	if err := checkSpec(s, nil); err == nil || !strings.Contains(err.Error(), "spec.healthChecks[0].current: ") {
		t.Errorf("checkSpec = %v, want an error naming spec.healthChecks[0].current", err)
	}
}

func TestCheckSpecAcceptsSpecsThatCanWork(t *testing.T) {
	deployKey := &v1alpha1.LocalObjectReference{Name: "git"}
	tests := []struct {
		name string
		git  v1alpha1.GitSource
	}{
		{"an HTTPS URL without a Secret (a public repository)", v1alpha1.GitSource{URL: "https://github.com/example/fleet.git"}},
		{"an SSH URL with a deploy key", v1alpha1.GitSource{URL: "ssh://git@github.com/example/fleet.git", SecretRef: deployKey}},
		{"an scp-like address with a deploy key", v1alpha1.GitSource{URL: "git@github.com:example/fleet.git", SecretRef: deployKey, Branch: "release/v1"}},
		{"a file URL with a tag", v1alpha1.GitSource{URL: "file:///srv/git/fleet.git", Tag: "v1.2.3"}},
		{"a file URL with a Secret it does not need", v1alpha1.GitSource{URL: "file:///srv/git/fleet.git", SecretRef: deployKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &v1alpha1.Sync{
				ObjectMeta: metav1.ObjectMeta{Namespace: "driftless-system", Name: strings.Repeat("f", 63-len("driftless-system."))},
				Spec:       v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: tt.git}},
			}
			if err := checkSpec(s, nil); err != nil {
				t.Errorf("checkSpec refused a spec that works: %v", err)
			}
		})
	}
}
