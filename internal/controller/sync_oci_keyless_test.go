package controller

import (
	"testing"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func TestOCISyncWithKeylessVerifyAppliesOnlyArtifactsSignedByAnAllowedIdentity(t *testing.T) {
	const issuer, subject = "https://token.actions.githubusercontent.com", "https://github.com/org/fleet/.github/workflows/release.yaml@refs/heads/main"
	h := newHarness(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	ca := testenv.NewFulcio(t, "fulcio-stand-in")
	h.trustedKeys(map[string][]byte{"trusted_root.json": ca.TrustedRoot(t)})
	signed := pushArtifact(t, reg, "latest", map[string]string{"app/web.yaml": configMap("web", "v1")})
	ca.SignWithCosign(t, reg.Host+"/fleet@"+signed, issuer, "release@example.com")
	h.createSync("fleet", ociSource(reg, func(o *v1alpha1.OCISource) {
		o.Verify = &v1alpha1.OCIVerification{Provider: v1alpha1.VerifyCosign,
			MatchOIDCIdentity:    []v1alpha1.OIDCIdentityMatch{{Issuer: `https://token\.actions\.githubusercontent\.com`, Subject: `release@example\.com`}},
			TrustedRootSecretRef: &v1alpha1.LocalObjectReference{Name: "trusted-keys"}}
	}))
	s := h.reconcile("fleet")
	h.expectReady(s)
	if h.configValue("web") != "v1" {
		t.Fatalf("artifact signed keyless by the allowed identity not applied: web = %q", h.configValue("web"))
	}

	// Signed by a certificate of the same authority for another
	// identity: refused, naming the digest and both identities; nothing
	// of it is applied.
	other := pushArtifact(t, reg, "latest", map[string]string{"app/web.yaml": configMap("web", "v2")})
	ca.SignWithCosign(t, reg.Host+"/fleet@"+other, issuer, subject)
	s = h.reconcile("fleet")
	h.expectFailed(s, v1alpha1.ReasonVerificationFailed, other, "subject `"+`release@example\.com`+"`", `subject "`+subject+`"`, "no matchOIDCIdentity matches")
	h.expectStalled(s, v1alpha1.ReasonVerificationFailed)
	if h.configValue("web") != "v1" {
		t.Errorf("artifact of another identity applied: web = %q", h.configValue("web"))
	}
}
