package receiver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// secretReadTimeout bounds one read of the webhook Secret, so that a
	// stalled API server costs a request at most this long.
	secretReadTimeout = 5 * time.Second
	// secretStaleFor is how long the last Secret read keeps serving while
	// reads fail (not while the Secret is absent: that is an answer).
	secretStaleFor = 5 * time.Minute
)

// secrets reads the webhook Secret, caching it (and its absence) for a
// TTL so that a flood of requests is not a flood of API calls. Requests
// that find the cache expired share one read, bounded by a timeout; none
// holds a lock while it reads.
//
// Layout: one key per provider (github, gitlab, gitea, bitbucket,
// generic), each the secret that provider's webhook is configured with;
// a provider without its own key uses the key "token". An empty value
// counts as absent: an empty HMAC key would let anyone sign.
type secrets struct {
	reader  client.Reader
	name    types.NamespacedName
	ttl     time.Duration
	timeout time.Duration // of one read; secretReadTimeout when zero
	stale   time.Duration // secretStaleFor when zero

	reads singleflight.Group

	mu      sync.Mutex
	fetched time.Time // of the last answer: the Secret, or its absence
	good    time.Time // of the last successful read of the Secret
	data    map[string][]byte
	err     error // the Secret is absent
}

// forProvider returns the secret of provider. Its errors name the Secret
// and the keys to set, never a value.
func (s *secrets) forProvider(ctx context.Context, provider string, now time.Time) ([]byte, error) {
	s.mu.Lock()
	fresh := !s.fetched.IsZero() && now.Sub(s.fetched) < s.ttl
	data, err := s.data, s.err
	s.mu.Unlock()
	if !fresh {
		ch := s.reads.DoChan("", func() (any, error) { return nil, s.read(ctx, now) })
		select {
		case r := <-ch:
			if r.Err != nil {
				return nil, r.Err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("read the webhook Secret %s: %w", s.name, ctx.Err())
		}
		s.mu.Lock()
		data, err = s.data, s.err
		s.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("the webhook Secret %s does not exist: create it with the key %s or %s (docs/webhooks.md)", s.name, provider, SharedSecretKey)
	}
	for _, key := range []string{provider, SharedSecretKey} {
		if v := data[key]; len(v) > 0 {
			return v, nil
		}
	}
	return nil, fmt.Errorf("the webhook Secret %s has neither the key %s nor %s: add one (docs/webhooks.md)", s.name, provider, SharedSecretKey)
}

// read gets the Secret into the cache. It does not end with the request
// that started it (others may wait on it), only with its timeout. A read
// that fails keeps the last Secret read for up to the stale bound and is
// tried again after the TTL; without one, it is an error and the next
// request tries again.
func (s *secrets) read(ctx context.Context, now time.Time) error {
	timeout, stale := s.timeout, s.stale
	if timeout <= 0 {
		timeout = secretReadTimeout
	}
	if stale <= 0 {
		stale = secretStaleFor
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var sec corev1.Secret
	err := s.reader.Get(ctx, s.name, &sec)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		s.data, s.err, s.good = nil, err, time.Time{}
	case err != nil:
		if s.good.IsZero() || now.Sub(s.good) >= stale {
			s.data, s.fetched, s.good = nil, time.Time{}, time.Time{}
			return fmt.Errorf("read the webhook Secret %s: %w", s.name, err)
		}
	default:
		s.data, s.err, s.good = sec.Data, nil, now
	}
	s.fetched = now
	return nil
}

// TenantSecretName is the Secret, in a team's own namespace, whose keys
// (the layout of the agent's webhook Secret: one per provider, or token)
// authorise pushes at /hooks/<provider>/<namespace>, which wake only that
// namespace's Syncs.
const TenantSecretName = "driftless-webhook"

// maxTenantSecrets bounds how many namespaces' Secrets (or their absence)
// are cached: requests name namespaces, and anyone can send requests.
const maxTenantSecrets = 1024

// tenantSecrets caches the TenantSecretName Secret of each namespace a
// request names, as secrets caches the agent's: one read per namespace
// and TTL however many requests come, a changed Secret used once the TTL
// passes.
type tenantSecrets struct {
	reader client.Reader
	ttl    time.Duration

	mu sync.Mutex
	by map[string]*secrets
}

// of returns the cache of namespace's Secret. Past maxTenantSecrets
// namespaces, those not read within the TTL are forgotten, then, if that
// is not enough, any.
func (t *tenantSecrets) of(namespace string, now time.Time) *secrets {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.by[namespace]; ok {
		return s
	}
	if t.by == nil {
		t.by = map[string]*secrets{}
	}
	if len(t.by) >= maxTenantSecrets {
		for ns, s := range t.by {
			s.mu.Lock()
			old := now.Sub(s.fetched) >= t.ttl
			s.mu.Unlock()
			if old {
				delete(t.by, ns)
			}
		}
		for ns := range t.by {
			if len(t.by) < maxTenantSecrets {
				break
			}
			delete(t.by, ns)
		}
	}
	s := &secrets{reader: t.reader, name: types.NamespacedName{Namespace: namespace, Name: TenantSecretName}, ttl: t.ttl}
	t.by[namespace] = s
	return s
}

// validNamespace reports whether ns can be a namespace's name (a DNS
// label), so that a request cannot make the receiver read anything else.
func validNamespace(ns string) bool {
	return len(validation.IsDNS1123Label(ns)) == 0
}
