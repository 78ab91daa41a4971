package oci_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

func trustedRoot(t *testing.T, f *testenv.Fulcio) *oci.TrustedRoot {
	t.Helper()
	root, err := oci.ParseTrustedRoot(f.TrustedRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestKeylessSignaturesOfTheRealCosignCLIAreCheckedAgainstTheTrustedRootAndIdentity(t *testing.T) {
	const issuer, subject = "https://token.actions.githubusercontent.com", "release@example.com"
	reg := testenv.NewOCIRegistry(t, "", "")
	digest := push(t, reg, "fleet", "1.0.0", map[string]string{"a.yaml": "a"})
	ca := testenv.NewFulcio(t, "fulcio-stand-in")
	ca.SignWithCosign(t, reg.Host+"/fleet@"+digest, issuer, subject)

	repo, err := oci.ParseRepository(reg.URL("fleet"), true)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(root *oci.TrustedRoot, iss, sub string) error {
		id, err := oci.ParseIdentity(iss, sub)
		if err != nil {
			t.Fatal(err)
		}
		req := oci.Request{URL: reg.URL("fleet"), Insecure: true, Root: root, Identities: []oci.Identity{id}, RootSecret: "sigstore-root"}
		return oci.Verify(context.Background(), req, repo, digest)
	}
	if err := verify(trustedRoot(t, ca), issuer, subject); err != nil {
		t.Fatalf("the signature of the allowed identity is refused: %v", err)
	}
	if err := verify(trustedRoot(t, ca), `https://token\.actions\.githubusercontent\.com`, `.*@example\.com`); err != nil {
		t.Fatalf("patterns matching the identity are refused: %v", err)
	}
	for _, tt := range []struct {
		name         string
		root         *oci.TrustedRoot
		issuer, subj string
		want         []string
	}{
		{"another subject", trustedRoot(t, ca), issuer, "someone@example.com",
			[]string{"subject `someone@example.com`", `names issuer "` + issuer + `" subject "` + subject + `", which no matchOIDCIdentity matches`}},
		{"another issuer", trustedRoot(t, ca), "https://accounts.google.com", subject,
			[]string{"issuer `https://accounts.google.com`", "which no matchOIDCIdentity matches"}},
		{"a subject the pattern only contains", trustedRoot(t, ca), issuer, "release@example",
			[]string{"which no matchOIDCIdentity matches"}},
		{"a certificate of another certificate authority", trustedRoot(t, testenv.NewFulcio(t, "another-ca")), issuer, subject,
			[]string{"is not one the trusted root's certificate authorities issued", "certificate signed by unknown authority"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := verify(tt.root, tt.issuer, tt.subj)
			var ve *oci.VerificationError
			if !errors.As(err, &ve) {
				t.Fatalf("verify = %v, want a VerificationError", err)
			}
			for _, want := range append(tt.want, "artifact "+digest, "trusted root sigstore-root") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q:\n%s", want, err)
				}
			}
		})
	}

	t.Run("a signature made with a key, not keyless", func(t *testing.T) {
		keyed := push(t, reg, "fleet", "1.1.0", map[string]string{"a.yaml": "b"})
		testenv.NewCosignKey(t).Sign(t, reg.Host+"/fleet", keyed)
		id, _ := oci.ParseIdentity(issuer, subject)
		err := oci.Verify(context.Background(), oci.Request{URL: reg.URL("fleet"), Insecure: true, Root: trustedRoot(t, ca), Identities: []oci.Identity{id}, RootSecret: "r"}, repo, keyed)
		if err == nil || !strings.Contains(err.Error(), "has no certificate (made with a key, not keyless)") {
			t.Errorf("verify = %v, want a refusal saying the signature has no certificate", err)
		}
	})
}

// A pattern that closes the group its anchors are wrapped in would match
// any identity: it is refused, and what is accepted matches only whole
// values.
func TestAnIdentityPatternCannotEscapeItsAnchors(t *testing.T) {
	const issuer = `https://token\.actions\.githubusercontent\.com`
	for _, subject := range []string{`x)|(.*`, `release@example\.com)|(.*`, `x)|^(.*`} {
		id, err := oci.ParseIdentity(issuer, subject)
		if err == nil {
			if id.Subject.MatchString("attacker@evil.example") {
				t.Fatalf("subject pattern %q matches attacker@evil.example", subject)
			}
			t.Fatalf("subject pattern %q is accepted; want it refused", subject)
		}
		if !strings.Contains(err.Error(), "subject") {
			t.Errorf("the error %q does not name the subject", err)
		}
	}
	if _, err := oci.ParseIdentity(`x)|(.*`, "release@example.com"); err == nil {
		t.Fatal("issuer pattern x)|(.* is accepted; want it refused")
	}
	id, err := oci.ParseIdentity(issuer, `release@example\.com|ci@example\.com`)
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]bool{"release@example.com": true, "ci@example.com": true,
		"release@example.com.evil": false, "evil-ci@example.com": false} {
		if got := id.Subject.MatchString(value); got != want {
			t.Errorf("subject `release@example\\.com|ci@example\\.com` matches %q: %v, want %v", value, got, want)
		}
	}
}
