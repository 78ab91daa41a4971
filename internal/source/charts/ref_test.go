package charts_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/source/charts"
)

func TestCredentialsAreNeverPrinted(t *testing.T) {
	creds := charts.CredentialsFromSecret(map[string][]byte{
		"username": []byte("robot-user"),
		"password": []byte("pw-s3cret-value"),
		"token":    []byte("tok-s3cret-value"),
		"ca.crt":   []byte("-----BEGIN CERTIFICATE-----ca-s3cret"),
	})
	ref := charts.Ref{Repository: "https://charts.example.com", Name: "web", Credentials: creds}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for _, value := range []any{creds, &creds, ref, &ref} {
			out := fmt.Sprintf(format, value)
			for _, secret := range []string{"robot-user", "pw-s3cret-value", "tok-s3cret-value", "ca-s3cret"} {
				if strings.Contains(out, secret) {
					t.Errorf("fmt %s of %T shows %q: %s", format, value, secret, out)
				}
			}
		}
	}
	if got := creds.String(); !strings.Contains(got, "password") || !strings.Contains(got, "redacted") {
		t.Errorf("String() = %q, want it to say which credentials are set", got)
	}
}
