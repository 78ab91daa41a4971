package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/policy"
	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/oci"
)

// ociRequest is SourceRequest of a Sync with spec.source.oci: the
// registry credentials of its secretRef and the cosign keys of its
// verify.secretRef, both read with reader. Errors name the Secret, never
// its content; a missing or unusable keys Secret is a
// *source.VerificationError.
func ociRequest(ctx context.Context, reader Reader, s *v1alpha1.Sync) (source.Request, error) {
	o := s.Spec.Source.OCI
	r := oci.Request{URL: o.URL, Tag: o.Tag, SemVer: o.SemVer, Digest: o.Digest, Insecure: o.Insecure}
	req := source.Request{URL: o.URL, OCI: &r}
	repo, err := r.Repository()
	if err != nil {
		return req, fmt.Errorf("spec.source.oci.url: %w", err)
	}
	if o.SecretRef != nil {
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: s.Namespace, Name: o.SecretRef.Name}
		if err := reader.Get(ctx, key, &secret); err != nil {
			return req, fmt.Errorf("read registry Secret %s of spec.source.oci.secretRef: %w", key, err)
		}
		auth, err := policy.AuthFromSecret(secret.Data, repo.RegistryStr())
		if err != nil {
			return req, fmt.Errorf("registry Secret %s of spec.source.oci.secretRef: %w", key, err)
		}
		r.Auth = auth
	}
	if v := o.Verify; v != nil {
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: s.Namespace, Name: v.SecretRef.Name}
		if err := reader.Get(ctx, key, &secret); err != nil {
			if apierrors.IsNotFound(err) {
				return req, &source.VerificationError{Err: fmt.Errorf("trusted keys Secret %s of spec.source.oci.verify not found: "+
					"create it with the cosign public key as cosign.pub (any *.pub entry)", key)}
			}
			return req, fmt.Errorf("read trusted keys Secret %s: %w", key, err)
		}
		keys, err := oci.ParseKeys(key.String(), secret.Data)
		if err != nil {
			return req, &source.VerificationError{Err: err}
		}
		r.Keys, r.KeysSecret = keys, secret.Name
	}
	return req, nil
}
