package admission

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/api/v1alpha1"
)

func TestIssuedCertificateVerifiesAgainstItsBundleForEveryHost(t *testing.T) {
	hosts := []string{"driftless-admission.driftless-system.svc", "127.0.0.1"}
	certPEM, keyPEM, bundle, err := issue(hosts, time.Hour, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := load(certPEM, keyPEM, bundle)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	for _, h := range hosts {
		if _, err := c.leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h}); err != nil {
			t.Errorf("the certificate does not verify for %s: %v", h, err)
		}
	}
}

func TestNeedsRenewal(t *testing.T) {
	now := time.Now()
	certPEM, keyPEM, bundle, err := issue([]string{"127.0.0.1"}, 90*time.Hour, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := load(certPEM, keyPEM, bundle)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		hosts []string
		at    time.Time
		want  bool
	}{
		{name: "a fresh certificate is kept", hosts: []string{"127.0.0.1"}, at: now, want: false},
		{name: "in its last third it is renewed", hosts: []string{"127.0.0.1"}, at: now.Add(61 * time.Hour), want: true},
		{name: "once expired it is renewed", hosts: []string{"127.0.0.1"}, at: now.Add(91 * time.Hour), want: true},
		{name: "a host it does not name (the URL changed) renews it", hosts: []string{"127.0.0.2"}, at: now, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsRenewal(c.leaf, tt.hosts, tt.at); got != tt.want {
				t.Errorf("needsRenewal = %v, want %v", got, tt.want)
			}
		})
	}
}

// A renewal stores a new certificate and keeps the previous CA in the
// bundle while it lasts, so replicas still serving the old certificate
// stay trusted; another replica loads the stored one instead of issuing.
func TestRefreshRenewsAndKeepsThePreviousCAInTheBundle(t *testing.T) {
	scheme := v1alpha1.NewScheme()
	api := fake.NewClientBuilder().WithScheme(scheme).Build()
	o := DefaultOptions()
	o.Namespace, o.URL, o.Client, o.Validity = "driftless-system", "https://127.0.0.1:9443/admission", api, time.Hour
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	first := s.cert.Load()

	other, _ := New(o)
	if err := other.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !other.cert.Load().leaf.Equal(first.leaf) {
		t.Errorf("a second replica issued its own certificate instead of loading the stored one")
	}

	// Age the stored certificate into its last third.
	var sec corev1.Secret
	if err := api.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: SecretName}, &sec); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, bundle, err := issue(s.hosts, time.Hour, time.Now().Add(-45*time.Minute), nil)
	if err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{certKey: certPEM, keyKey: keyPEM, caKey: bundle}
	if err := api.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	if err := s.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := s.cert.Load()
	if renewed.leaf.NotBefore.Before(time.Now().Add(-2 * time.Minute)) {
		t.Fatalf("the aged certificate was not renewed: valid from %v", renewed.leaf.NotBefore)
	}
	if n := len(certificates(renewed.caBundle)); n != 2 {
		t.Errorf("the bundle holds %d CAs, want 2: the new one and the previous one, still valid", n)
	}
}
