package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/testenv"
)

// installCRDs creates the driftless CRDs as the agent would, when they
// are not there yet.
func installCRDs(t *testing.T) {
	t.Helper()
	defs, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDs(context.Background(), defs...); err != nil {
		t.Fatal(err)
	}
}

func TestImageScanPrintsTheDecisionAndWhyEachTagWasRejected(t *testing.T) {
	installCRDs(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	reg := testenv.NewRegistry(t)
	for _, tag := range []string{"1.0.0", "1.2.3", "2.0.0", "latest", "1.3.0-rc.1"} {
		reg.Push(t, "app", tag)
	}
	p := &v1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1alpha1.ImagePolicySpec{Image: reg.Host() + "/app", Insecure: true, Exclude: []string{"-rc"},
			Policy: v1alpha1.ImagePolicyChoice{SemVer: &v1alpha1.SemVerPolicy{Range: "^1"}}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.ControlPlane.KubeconfigPath()

	var got imageScan
	res := runCLI(t, "image", "scan", ns+"/app", "-o", "json", "--kubeconfig", kubeconfig).expect(t, 0)
	if err := json.Unmarshal([]byte(res.out), &got); err != nil {
		t.Fatalf("%v\n%s", err, res.out)
	}
	if got.Selected != "1.2.3" || !strings.HasPrefix(got.Digest, "sha256:") || got.Considered != 5 || got.Skipped != 1 {
		t.Errorf("decision %+v, want 1.2.3 with its digest, 5 considered, 1 skipped", got)
	}
	why := map[string]string{}
	for _, r := range got.Rejected {
		why[r.Tag] = r.Reason
	}
	for tag, want := range map[string]string{"2.0.0": "outside the range", "latest": "not a semantic version",
		"1.3.0-rc.1": `excluded by "-rc"`, "1.0.0": "lower than 1.2.3"} {
		if !strings.Contains(why[tag], want) {
			t.Errorf("%s rejected as %q, want %q", tag, why[tag], want)
		}
	}

	text := runCLI(t, "image", "scan", ns+"/app", "--kubeconfig", kubeconfig).expect(t, 0).out
	if !strings.Contains(text, ns+"/app selects "+reg.Host()+"/app:1.2.3") || !strings.Contains(text, "outside the range") {
		t.Errorf("text output:\n%s", text)
	}

	runCLI(t, "image", "scan", ns+"/nope", "--kubeconfig", kubeconfig).expect(t, 2)
	p.Spec.Policy.SemVer.Range = ">=3"
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "image", "scan", ns+"/app", "--kubeconfig", kubeconfig).expect(t, 1); !strings.Contains(r.out, "selects no tag") {
		t.Errorf("with a range matching nothing:\n%s", r.out)
	}
}

func TestImageListShowsPoliciesAndWhatReportModeWouldCommit(t *testing.T) {
	installCRDs(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	p := &v1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1alpha1.ImagePolicySpec{Image: "registry.example.com/app", Policy: v1alpha1.ImagePolicyChoice{SemVer: &v1alpha1.SemVerPolicy{Range: "^1"}}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.LatestTag = "1.2.3"
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonTagSelected,
		Message: "selected registry.example.com/app:1.2.3", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: "https://example.com/fleet.git"}},
			ImageUpdate: &v1alpha1.ImageUpdateSpec{}}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Status.ImageUpdate = &v1alpha1.ImageUpdateStatus{Pending: []v1alpha1.ImageChange{{File: "apps/app.yaml", Line: 11,
		Image: "registry.example.com/app", Old: "registry.example.com/app:1.0.0", New: "registry.example.com/app:1.2.3", Policy: ns + "/app"}}}
	if err := c.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, "image", "list", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0).out
	rows := tableRows(t, strings.SplitN(out, "\n\n", 2)[0])
	if len(rows) != 1 || rows[0]["POLICY"] != ns+"/app" || rows[0]["LATEST"] != "1.2.3" {
		t.Errorf("policy rows %v, want %s/app at 1.2.3", rows, ns)
	}
	for _, want := range []string{"Sync " + ns + "/fleet (Report mode)", "would change apps/app.yaml:11 registry.example.com/app:1.0.0 -> registry.example.com/app:1.2.3 (ImagePolicy " + ns + "/app)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestImageListAndHistoryShowThePullRequest(t *testing.T) {
	installCRDs(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: "https://github.com/org/fleet.git", Branch: "main"}},
			ImageUpdate: &v1alpha1.ImageUpdateSpec{Mode: v1alpha1.ImageUpdatePullRequest, Branch: "image-updates",
				PullRequest: &v1alpha1.PullRequestSpec{Provider: v1alpha1.ProviderGitHub, TokenSecretRef: v1alpha1.LocalObjectReference{Name: "pr"}}}}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Status.ImageUpdate = &v1alpha1.ImageUpdateStatus{LastCommit: "1a2b3c4d", PullRequest: &v1alpha1.PullRequestStatus{
		Number: 12, URL: "https://github.com/org/fleet/pull/12", State: v1alpha1.PullRequestOpen, Commit: "1a2b3c4d"}}
	s.Status.History = []v1alpha1.SyncRecord{{Revision: strings.Repeat("e", 40), StartedAt: metav1.Now(), Duration: "1s", Result: v1alpha1.ResultSucceeded}}
	if err := c.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, "image", "list", "-n", ns, "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0).out
	for _, want := range []string{"Sync " + ns + "/fleet (PullRequest mode), last commit 1a2b3c4d:", "  pull request #12 https://github.com/org/fleet/pull/12 (Open)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "nothing to change") {
		t.Errorf("a Sync with an open request says nothing to change:\n%s", out)
	}
	history := runCLI(t, "history", ns+"/fleet", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0).out
	if want := "Image update: pull request #12 https://github.com/org/fleet/pull/12 (Open), robot commit 1a2b3c4, applied once merged"; !strings.Contains(history, want) {
		t.Errorf("history lacks %q:\n%s", want, history)
	}
	js := runCLI(t, "history", ns+"/fleet", "-o", "json", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0).out
	if !strings.Contains(js, `"pullRequest": {`) || !strings.Contains(js, `"url": "https://github.com/org/fleet/pull/12"`) {
		t.Errorf("history -o json lacks the pull request:\n%s", js)
	}
}
