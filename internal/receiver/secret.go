package receiver

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secrets reads the webhook Secret, caching it (and its absence) for a
// TTL so that a flood of requests is not a flood of API calls.
//
// Layout: one key per provider (github, gitlab, gitea, bitbucket,
// generic), each the secret that provider's webhook is configured with;
// a provider without its own key uses the key "token". An empty value
// counts as absent: an empty HMAC key would let anyone sign.
type secrets struct {
	reader client.Reader
	name   types.NamespacedName
	ttl    time.Duration

	mu      sync.Mutex
	fetched time.Time
	data    map[string][]byte
	err     error
}

// forProvider returns the secret of provider. Its errors name the Secret
// and the keys to set, never a value.
func (s *secrets) forProvider(ctx context.Context, provider string, now time.Time) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetched.IsZero() || now.Sub(s.fetched) >= s.ttl {
		var sec corev1.Secret
		err := s.reader.Get(ctx, s.name, &sec)
		switch {
		case apierrors.IsNotFound(err):
			s.data, s.err = nil, fmt.Errorf("the webhook Secret %s does not exist: create it with the key %s or %s (docs/webhooks.md)", s.name, provider, SharedSecretKey)
		case err != nil:
			// Not cached: the next request tries again.
			return nil, fmt.Errorf("read the webhook Secret %s: %w", s.name, err)
		default:
			s.data, s.err = sec.Data, nil
		}
		s.fetched = now
	}
	if s.err != nil {
		return nil, s.err
	}
	for _, key := range []string{provider, SharedSecretKey} {
		if v := s.data[key]; len(v) > 0 {
			return v, nil
		}
	}
	return nil, fmt.Errorf("the webhook Secret %s has neither the key %s nor %s: add one (docs/webhooks.md)", s.name, provider, SharedSecretKey)
}
