package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/secrets"
)

// ErrKeysUnreadable wraps an error of the API server while reading a
// Sync's key Secret: unlike a missing Secret, a retry may succeed.
var ErrKeysUnreadable = errors.New("decryption keys could not be read")

// DecryptionKeys returns the keys that decrypt the Sync's files encrypted
// with SOPS (age identities, PGP keys, credentials for the cloud key
// services): those of the Secret spec.decryption.secretRef names, in the
// Sync's namespace. A Sync without a secretRef in the namespace of
// defaultKey (the agent's --sops-age-key-secret) uses that Secret, if it
// exists; any other Sync without one gets nil, and a render that meets an
// encrypted file fails. Read keys with an uncached reader: Secrets must
// not be cached. A missing Secret, or one without a decryption key, is an
// error naming the Secret and never its content; an API error reading it
// wraps ErrKeysUnreadable.
func DecryptionKeys(ctx context.Context, reader Reader, s *v1alpha1.Sync, defaultKey client.ObjectKey) (*secrets.Keys, error) {
	var key client.ObjectKey
	var field string
	switch d := s.Spec.Decryption; {
	case d != nil && d.SecretRef != nil:
		key, field = client.ObjectKey{Namespace: s.Namespace, Name: d.SecretRef.Name}, "spec.decryption.secretRef"
	case defaultKey.Name != "" && defaultKey.Namespace == s.Namespace:
		key, field = defaultKey, "the agent's --sops-age-key-secret"
	case d != nil:
		return nil, fmt.Errorf("spec.decryption sets no secretRef; name a Secret in namespace %s holding its keys (docs/secrets.md)", s.Namespace)
	default:
		return nil, nil
	}
	var sec corev1.Secret
	err := reader.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err) && s.Spec.Decryption == nil:
		return nil, nil // the default key is optional
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("key Secret %s of %s does not exist; create it with driftless secret keygen --create-secret %s", key, field, key)
	case err != nil:
		return nil, fmt.Errorf("%w: read Secret %s of %s: %w", ErrKeysUnreadable, key, field, err)
	}
	return secrets.ParseKeys(fmt.Sprintf("Secret %s of %s", key, field), sec.Data)
}

// Decryptor returns keys as a render.Decryptor: nil, decrypting nothing,
// for nil keys.
func Decryptor(keys *secrets.Keys) render.Decryptor {
	if keys == nil {
		return nil
	}
	return keys
}
