package engine

import (
	"context"
	"errors"
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
	if v := o.Verify; v != nil && len(v.MatchOIDCIdentity) > 0 {
		if err := keylessRequest(ctx, reader, s.Namespace, v, &r); err != nil {
			return req, err
		}
	} else if v != nil && v.SecretRef != nil {
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

// keylessRequest fills r with the trusted root of v.trustedRootSecretRef
// (read with reader) and v's identities. A missing or unusable Secret, or
// a pattern that does not compile, is a *source.VerificationError.
func keylessRequest(ctx context.Context, reader Reader, namespace string, v *v1alpha1.OCIVerification, r *oci.Request) error {
	for i, m := range v.MatchOIDCIdentity {
		id, err := oci.ParseIdentity(m.Issuer, m.Subject)
		if err != nil {
			return &source.VerificationError{Err: fmt.Errorf("spec.source.oci.verify.matchOIDCIdentity[%d]: %w", i, err)}
		}
		r.Identities = append(r.Identities, id)
	}
	if v.TrustedRootSecretRef == nil {
		return &source.VerificationError{Err: errors.New("spec.source.oci.verify.matchOIDCIdentity needs spec.source.oci.verify.trustedRootSecretRef: " +
			"the Secret with the Sigstore trusted root (" + oci.TrustedRootKey + ") that keyless certificates must come from")}
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: v.TrustedRootSecretRef.Name}
	if err := reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return &source.VerificationError{Err: fmt.Errorf("trusted root Secret %s of spec.source.oci.verify not found: "+
				"create it with the Sigstore trusted root as %s (cosign trusted-root create)", key, oci.TrustedRootKey)}
		}
		return fmt.Errorf("read trusted root Secret %s: %w", key, err)
	}
	data, ok := secret.Data[oci.TrustedRootKey]
	if !ok {
		return &source.VerificationError{Err: fmt.Errorf("trusted root Secret %s has no %s entry: add the Sigstore trusted root under that name", key, oci.TrustedRootKey)}
	}
	root, err := oci.ParseTrustedRoot(data)
	if err != nil {
		return &source.VerificationError{Err: fmt.Errorf("entry %s of trusted root Secret %s: %w", oci.TrustedRootKey, key, err)}
	}
	r.Root, r.RootSecret = root, key.String()
	return nil
}
