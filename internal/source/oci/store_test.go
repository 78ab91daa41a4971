package oci_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/driftless/driftless/internal/source/oci"
	"github.com/driftless/driftless/internal/testenv"
)

// The Store keeps one extraction per digest, but a digest is not a
// secret: a request that names a cached digest gets its files only when
// its own repository, with its own credentials, serves that manifest.
func TestStoreServesACachedDigestOnlyToARequestThatMayReadIt(t *testing.T) {
	ctx := context.Background()
	private := testenv.NewOCIRegistry(t, "team-a", "s3cr3t")
	open := testenv.NewOCIRegistry(t, "", "")
	authA := &authn.Basic{Username: "team-a", Password: "s3cr3t"}
	_, digest, err := oci.Push(ctx, oci.PushOptions{URL: private.URL("team-a/fleet") + ":1.0.0", Dir: writeFiles(t, map[string]string{"secret.yaml": "team a's"}),
		Insecure: true, Request: oci.Request{Auth: authA}})
	if err != nil {
		t.Fatal(err)
	}
	push(t, open, "team-b/fleet", "1.0.0", map[string]string{"b.yaml": "team b's"})
	store := &oci.Store{Dir: t.TempDir()}
	a := oci.Request{URL: private.URL("team-a/fleet"), Digest: digest, Insecure: true, Auth: authA}
	dir, err := store.Checkout(ctx, a, digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir, "secret.yaml"); got != "team a's" {
		t.Fatalf("team A's checkout: secret.yaml = %q", got)
	}

	for _, tc := range []struct {
		name string
		req  oci.Request
		want string
	}{
		{"A's repository without credentials", oci.Request{URL: private.URL("team-a/fleet"), Digest: digest, Insecure: true}, "401 Unauthorized"},
		{"A's repository with other credentials", oci.Request{URL: private.URL("team-a/fleet"), Digest: digest, Insecure: true,
			Auth: &authn.Basic{Username: "team-b", Password: "guess"}}, "401 Unauthorized"},
		{"a repository of another registry that does not hold the digest", oci.Request{URL: open.URL("team-b/fleet"), Digest: digest, Insecure: true}, "404 Not Found"},
		{"a repository of the same registry that does not hold the digest", oci.Request{URL: private.URL("team-b/fleet"), Digest: digest, Insecure: true, Auth: authA}, "404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := store.Checkout(ctx, tc.req, digest)
			if err == nil {
				t.Fatalf("got A's files in %s; want an error", dir)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.req.URL) {
				t.Fatalf("error %v, want it to name %s and say %q", err, tc.req.URL, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("the error holds the password: %v", err)
			}
		})
	}
	// A's next checkouts are still served from the cache.
	if _, err := store.Checkout(ctx, a, digest); err != nil {
		t.Fatalf("team A's second checkout: %v", err)
	}
}
