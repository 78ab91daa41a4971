package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/testenv"
)

// trustedKeys creates the Secret "trusted-keys" holding data.
func (h *harness) trustedKeys(data map[string][]byte) {
	h.t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trusted-keys", Namespace: h.ns}, Data: data}
	if err := c.Create(context.Background(), secret); err != nil {
		h.t.Fatal(err)
	}
}

func verifyWith(mode v1alpha1.VerificationMode) func(*v1alpha1.Sync) {
	return func(s *v1alpha1.Sync) {
		s.Spec.Paths = []string{"app"}
		s.Spec.Source.Git.Verify = &v1alpha1.GitVerification{Mode: mode, SecretRef: v1alpha1.LocalObjectReference{Name: "trusted-keys"}}
	}
}

// configValue returns the value of ConfigMap name, or "" when it does not
// exist.
func (h *harness) configValue(name string) string {
	h.t.Helper()
	cm := get(h.t, "v1", "ConfigMap", h.ns, name)
	if cm == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(cm.Object, "data", "key")
	return v
}

// expectStalled fails unless the Sync is Stalled with reason.
func (h *harness) expectStalled(s *v1alpha1.Sync, reason string) {
	h.t.Helper()
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
		h.t.Errorf("Stalled = %+v, want True with reason %s", c, reason)
	}
}

func TestSyncAppliesOnlyCommitsSignedByATrustedKey(t *testing.T) {
	h := newHarness(t)
	key, stranger := testenv.NewSSHSigningKey(t), testenv.NewSSHSigningKey(t)
	h.trustedKeys(map[string][]byte{source.AllowedSignersKey: []byte(key.AllowedSigner + "\n")})
	signed := h.repo.SignedCommit(t, key, "v1", map[string]string{"app/web.yaml": configMap("web", "v1")})
	h.createSync("fleet", verifyWith(v1alpha1.VerifyHEAD))

	s := h.reconcile("fleet")
	h.expectReady(s)
	if got := h.configValue("web"); got != "v1" {
		t.Fatalf("signed commit not applied: web = %q, want v1", got)
	}
	inventory := listed(t, s)

	// An unsigned commit, then one signed by a key nobody trusts: both are
	// refused, naming the commit and the signer, and nothing of them is
	// applied.
	unsigned := h.repo.Commit(t, "sneaky", map[string]string{
		"app/web.yaml":   configMap("web", "v2"),
		"app/extra.yaml": configMap("extra", "x"),
	})
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonVerificationFailed, "commit "+source.Short(unsigned)+" is not signed", "sign the commit with a trusted key")
	h.expectStalled(s, v1alpha1.ReasonVerificationFailed)
	eventsFor(t, h.ns, "fleet", "commit "+source.Short(unsigned)+" is not signed")

	forged := h.repo.SignedCommit(t, stranger, "forged", map[string]string{"app/web.yaml": configMap("web", "v3")})
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonVerificationFailed, "commit "+source.Short(forged), "SSH key "+stranger.ID,
		"add the key to trusted-keys/allowed_signers or sign the commit with a trusted key")
	h.expectStalled(s, v1alpha1.ReasonVerificationFailed)
	eventsFor(t, h.ns, "fleet", "SSH key "+stranger.ID)

	if got := h.configValue("web"); got != "v1" {
		t.Errorf("web = %q after unverified commits, want v1 (the last verified revision)", got)
	}
	if h.configValue("extra") != "" {
		t.Error("ConfigMap extra of the unsigned commit was applied")
	}
	if s.Status.LastAppliedRevision != signed {
		t.Errorf("lastAppliedRevision = %s, want %s (the last verified revision)", s.Status.LastAppliedRevision, signed)
	}
	if now := listed(t, s); len(now) != len(inventory) {
		t.Errorf("inventory changed to %v", now)
	}
	keyBody := strings.Fields(key.AllowedSigner)[2]
	if msg := ready(s).Message; strings.Contains(msg, keyBody) {
		t.Errorf("message quotes the trusted keys Secret:\n%s", msg)
	}

	// A signed commit recovers.
	recovered := h.repo.SignedCommit(t, key, "v4", map[string]string{"app/web.yaml": configMap("web", "v4")})
	s = h.reconcile("fleet")
	h.expectReady(s)
	if meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionStalled) {
		t.Error("still Stalled after a signed commit")
	}
	if s.Status.LastAppliedRevision != recovered || h.configValue("web") != "v4" {
		t.Errorf("signed commit %s not applied: lastAppliedRevision %s, web = %q", source.Short(recovered), source.Short(s.Status.LastAppliedRevision), h.configValue("web"))
	}
}

func TestSyncInTagModeAppliesOnlySignedAnnotatedTags(t *testing.T) {
	h := newHarness(t)
	key := testenv.NewSSHSigningKey(t)
	h.trustedKeys(map[string][]byte{source.AllowedSignersKey: []byte(key.AllowedSigner + "\n")})
	// The commits themselves are not signed: in Tag mode the tag is.
	h.repo.Commit(t, "v1", map[string]string{"app/web.yaml": configMap("web", "v1")})
	h.repo.SignedTag(t, key, "v1")
	h.createSync("fleet", func(s *v1alpha1.Sync) {
		verifyWith(v1alpha1.VerifyTag)(s)
		s.Spec.Source.Git.Branch, s.Spec.Source.Git.Tag = "", "v1"
	})
	s := h.reconcile("fleet")
	h.expectReady(s)
	if got := h.configValue("web"); got != "v1" {
		t.Fatalf("signed tag not applied: web = %q, want v1", got)
	}

	h.repo.Commit(t, "v2", map[string]string{"app/web.yaml": configMap("web", "v2")})
	h.repo.Tag(t, "v2")
	s.Spec.Source.Git.Tag = "v2"
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonVerificationFailed, "tag v2 is a lightweight tag", "git tag -s v2")
	h.expectStalled(s, v1alpha1.ReasonVerificationFailed)
	if got := h.configValue("web"); got != "v1" {
		t.Errorf("web = %q after a lightweight tag, want v1", got)
	}
}

func TestSyncWithoutUsableTrustedKeysIsStalled(t *testing.T) {
	cases := []struct {
		name  string
		data  map[string][]byte // nil: no Secret
		wants []string
	}{
		{name: "a missing Secret", wants: []string{"trusted keys Secret", "/trusted-keys of spec.source.git.verify not found", "allowed_signers"}},
		{name: "a Secret with no key", data: map[string][]byte{"readme": []byte("later")}, wants: []string{"trusted keys Secret trusted-keys holds no key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name+" stalls the Sync with nothing applied", func(t *testing.T) {
			h := newHarness(t)
			if tc.data != nil {
				h.trustedKeys(tc.data)
			}
			h.repo.Commit(t, "v1", map[string]string{"app/web.yaml": configMap("web", "v1")})
			h.createSync("fleet", verifyWith(v1alpha1.VerifyHEAD))
			s := h.reconcile("fleet")
			h.expectFailed(s, v1alpha1.ReasonVerificationFailed, tc.wants...)
			h.expectStalled(s, v1alpha1.ReasonVerificationFailed)
			if h.configValue("web") != "" {
				t.Error("the commit was applied without verification")
			}
		})
	}
}

func TestTagModeWithoutATagIsRefusedByTheAPI(t *testing.T) {
	h := newHarness(t)
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: h.ns},
		Spec: v1alpha1.SyncSpec{Source: v1alpha1.Source{Git: v1alpha1.GitSource{URL: h.repo.FileURL(), Branch: "main",
			Verify: &v1alpha1.GitVerification{Mode: v1alpha1.VerifyTag, SecretRef: v1alpha1.LocalObjectReference{Name: "trusted-keys"}}}}},
	}
	err := c.Create(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "verify mode Tag needs a tag to follow") {
		t.Fatalf("create returned %v, want a refusal", err)
	}
}

func TestTurningVerificationOnChecksTheRevisionAlreadyApplied(t *testing.T) {
	// The revision is applied and its render cached; adding verify must
	// not trust it for being there already.
	h := newHarness(t)
	h.trustedKeys(map[string][]byte{source.AllowedSignersKey: []byte(testenv.NewSSHSigningKey(t).AllowedSigner + "\n")})
	rev := h.repo.Commit(t, "unsigned", map[string]string{"app/web.yaml": configMap("web", "v1")})
	h.createSync("fleet", func(s *v1alpha1.Sync) { s.Spec.Paths = []string{"app"} })
	s := h.reconcile("fleet")
	h.expectReady(s)

	verifyWith(v1alpha1.VerifyHEAD)(s)
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonVerificationFailed, "commit "+source.Short(rev)+" is not signed")
	h.expectStalled(s, v1alpha1.ReasonVerificationFailed)
}
