package controller

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

// pushArtifact pushes files as a Flux artifact under tag and returns its
// digest.
func pushArtifact(t *testing.T, reg *testenv.OCIRegistry, tag string, files map[string]string) string {
	t.Helper()
	dir := testenv.WriteFiles(t, files)
	_, digest, err := oci.Push(context.Background(), oci.PushOptions{URL: reg.URL("fleet") + ":" + tag, Dir: dir, Source: "https://example.com/fleet.git", Revision: tag, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func ociSource(reg *testenv.OCIRegistry, set func(*v1alpha1.OCISource)) func(*v1alpha1.Sync) {
	return func(s *v1alpha1.Sync) {
		o := &v1alpha1.OCISource{URL: reg.URL("fleet"), Insecure: true}
		set(o)
		s.Spec.Source = v1alpha1.Source{OCI: o}
		s.Spec.Paths = []string{"app"}
	}
}

func TestOCISyncFollowsTheHighestTagInItsSemverRange(t *testing.T) {
	h := newHarness(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	v1 := pushArtifact(t, reg, "1.0.0", map[string]string{"app/web.yaml": configMap("web", "v1")})
	h.createSync("semver", ociSource(reg, func(o *v1alpha1.OCISource) { o.SemVer = ">=1.0.0 <2.0.0" }))

	s := h.reconcile("semver")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != "1.0.0@"+v1 || h.configValue("web") != "v1" {
		t.Fatalf("lastAppliedRevision %s, web = %q; want 1.0.0@%s and v1", s.Status.LastAppliedRevision, h.configValue("web"), v1)
	}

	v2 := pushArtifact(t, reg, "1.1.0", map[string]string{"app/web.yaml": configMap("web", "v2"), "app/extra.yaml": configMap("extra", "x")})
	pushArtifact(t, reg, "2.0.0", map[string]string{"app/web.yaml": configMap("web", "v3")})
	s = h.reconcile("semver")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != "1.1.0@"+v2 || h.configValue("web") != "v2" || h.configValue("extra") != "x" {
		t.Fatalf("new tag in range not followed: lastAppliedRevision %s, web = %q", s.Status.LastAppliedRevision, h.configValue("web"))
	}

}

func TestOCISyncPinnedToADigestDoesNotMoveWhenItsTagDoes(t *testing.T) {
	h := newHarness(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	v1 := pushArtifact(t, reg, "1.0.0", map[string]string{"app/web.yaml": configMap("web", "v1")})
	h.createSync("pinned", ociSource(reg, func(o *v1alpha1.OCISource) { o.Digest = v1 }))
	s := h.reconcile("pinned")
	h.expectReady(s)
	pushArtifact(t, reg, "1.0.0", map[string]string{"app/web.yaml": configMap("web", "v2")})
	s = h.reconcile("pinned")
	h.expectReady(s)
	if s.Status.LastAppliedRevision != v1 || h.configValue("web") != "v1" {
		t.Errorf("pinned digest moved: lastAppliedRevision %s, web = %q; want %s and v1", s.Status.LastAppliedRevision, h.configValue("web"), v1)
	}
}

// setTrustedKeys replaces the data of the Secret "trusted-keys".
func (h *harness) setTrustedKeys(data map[string][]byte) {
	h.t.Helper()
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: "trusted-keys"}, &secret); err != nil {
		h.t.Fatal(err)
	}
	secret.Data = data
	if err := c.Update(context.Background(), &secret); err != nil {
		h.t.Fatal(err)
	}
}

func TestOCISyncWithVerifyAppliesOnlyArtifactsSignedByATrustedCosignKey(t *testing.T) {
	h := newHarness(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	key := testenv.NewCosignKey(t)
	h.trustedKeys(map[string][]byte{"cosign.pub": key.PublicPEM})
	signed := pushArtifact(t, reg, "latest", map[string]string{"app/web.yaml": configMap("web", "v1")})
	key.Sign(t, reg.Host+"/fleet", signed)
	h.createSync("fleet", ociSource(reg, func(o *v1alpha1.OCISource) {
		o.Verify = &v1alpha1.OCIVerification{Provider: v1alpha1.VerifyCosign, SecretRef: &v1alpha1.LocalObjectReference{Name: "trusted-keys"}}
	}))
	s := h.reconcile("fleet")
	h.expectReady(s)
	if h.configValue("web") != "v1" {
		t.Fatalf("signed artifact not applied: web = %q", h.configValue("web"))
	}

	// An unsigned artifact under the same tag: refused, naming the
	// digest and the key tried; nothing of it is applied.
	unsigned := pushArtifact(t, reg, "latest", map[string]string{"app/web.yaml": configMap("web", "v2"), "app/extra.yaml": configMap("extra", "x")})
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonVerificationFailed, unsigned, "is not signed", "trusted-keys/cosign.pub")
	h.expectStalled(s, v1alpha1.ReasonVerificationFailed)
	if h.configValue("web") != "v1" || h.configValue("extra") != "" {
		t.Errorf("unsigned artifact applied: web = %q, extra = %q", h.configValue("web"), h.configValue("extra"))
	}
	if s.Status.LastAppliedRevision != "latest@"+signed {
		t.Errorf("lastAppliedRevision = %s, want the last verified latest@%s", s.Status.LastAppliedRevision, signed)
	}

	// Signed by the real cosign CLI with the trusted key: applied; with
	// another key: refused.
	dir, run := testenv.CosignRunner(t)
	run("generate-key-pair")
	pub, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	h.setTrustedKeys(map[string][]byte{"cosign.pub": pub})
	sign := func(digest string) {
		run("sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-http-registry", "--allow-insecure-registry", "-y", reg.Host+"/fleet@"+digest)
	}
	sign(unsigned)
	s = h.reconcile("fleet")
	h.expectReady(s)
	if h.configValue("web") != "v2" || h.configValue("extra") != "x" {
		t.Fatalf("artifact signed by cosign not applied: web = %q", h.configValue("web"))
	}

	run("generate-key-pair", "--output-key-prefix", "other")
	other := pushArtifact(t, reg, "latest", map[string]string{"app/web.yaml": configMap("web", "v3")})
	run("sign", "--key", "other.key", "--tlog-upload=false", "--allow-http-registry", "--allow-insecure-registry", "-y", reg.Host+"/fleet@"+other)
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonVerificationFailed, other, "none by a trusted key", "trusted-keys/cosign.pub")
	if h.configValue("web") != "v2" {
		t.Errorf("artifact signed by an untrusted key applied: web = %q", h.configValue("web"))
	}
}
