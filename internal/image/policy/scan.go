package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/time/rate"
)

// ScanOptions configure a Scanner.
type ScanOptions struct {
	// RequestsPerSecond bounds the requests sent to one registry (all
	// policies together); Burst is how many may go at once.
	RequestsPerSecond float64
	Burst             int
	// Retries is how many times a request answered 429 or 5xx, or cut
	// off, is retried, with exponential back-off from RetryDelay.
	Retries    int
	RetryDelay time.Duration
	// PageSize is the number of tags asked for per page of the tag list.
	PageSize int
	// Transport is the base HTTP transport; nil uses remote.DefaultTransport.
	Transport http.RoundTripper
}

// DefaultScanOptions returns the agent's defaults: 5 requests per second
// per registry, 4 retries from 1s.
func DefaultScanOptions() ScanOptions {
	return ScanOptions{RequestsPerSecond: 5, Burst: 10, Retries: 4, RetryDelay: time.Second, PageSize: 1000}
}

// Scanner lists tags and resolves digests. It is safe for concurrent use;
// its rate limits are shared by every scan.
type Scanner struct {
	opts     ScanOptions
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// NewScanner returns a Scanner with opts.
func NewScanner(opts ScanOptions) *Scanner {
	return &Scanner{opts: opts, limiters: map[string]*rate.Limiter{}}
}

// Target is one repository to scan and how to reach it.
type Target struct {
	// Image is the repository, without tag.
	Image string
	// Insecure allows plain HTTP.
	Insecure bool
	// Auth is the credentials; nil is anonymous.
	Auth authn.Authenticator
}

// Repository parses t.Image.
func (t Target) Repository() (name.Repository, error) {
	var opts []name.Option
	if t.Insecure {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(t.Image, opts...)
	if err != nil {
		return repo, fmt.Errorf("image %q is not a repository name (registry/path, no tag): %w", t.Image, err)
	}
	return repo, nil
}

// List returns every tag of the repository, following pagination.
func (s *Scanner) List(ctx context.Context, t Target) ([]string, error) {
	repo, err := t.Repository()
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(repo, s.remoteOptions(ctx, repo.RegistryStr(), t)...)
	if err != nil {
		return nil, fmt.Errorf("list the tags of %s: %w", repo, Explain(err))
	}
	return tags, nil
}

// Digest resolves the digest of repository:tag.
func (s *Scanner) Digest(ctx context.Context, t Target, tag string) (string, error) {
	repo, err := t.Repository()
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(repo.Tag(tag), s.remoteOptions(ctx, repo.RegistryStr(), t)...)
	if err != nil {
		return "", fmt.Errorf("resolve the digest of %s:%s: %w", repo, tag, Explain(err))
	}
	return desc.Digest.String(), nil
}

func (s *Scanner) remoteOptions(ctx context.Context, registry string, t Target) []remote.Option {
	base := s.opts.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	auth := t.Auth
	if auth == nil {
		auth = authn.Anonymous
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(auth),
		remote.WithTransport(&limitedTransport{base: base, limiter: s.limiter(registry)}),
		remote.WithRetryBackoff(remote.Backoff{Duration: s.opts.RetryDelay, Factor: 2, Jitter: 0.1, Steps: s.opts.Retries + 1}),
		remote.WithRetryStatusCodes(http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout),
	}
	if s.opts.PageSize > 0 {
		opts = append(opts, remote.WithPageSize(s.opts.PageSize))
	}
	return opts
}

func (s *Scanner) limiter(registry string) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limiters[registry]
	if !ok {
		limit := rate.Inf
		if s.opts.RequestsPerSecond > 0 {
			limit = rate.Limit(s.opts.RequestsPerSecond)
		}
		l = rate.NewLimiter(limit, max(s.opts.Burst, 1))
		s.limiters[registry] = l
	}
	return l
}

// limitedTransport waits for its registry's limiter before each request.
type limitedTransport struct {
	base    http.RoundTripper
	limiter *rate.Limiter
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.limiter.Wait(req.Context()); err != nil {
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// Explain turns a registry error into one a user can act on: wrong
// credentials and a missing repository say so. The registry's own message
// is kept; it never contains the credentials sent.
func Explain(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the registry refused the credentials (HTTP %d); check the Secret of spec.secretRef: %w", terr.StatusCode, err)
		case http.StatusNotFound:
			return fmt.Errorf("the repository does not exist (HTTP 404); check spec.image: %w", err)
		case http.StatusTooManyRequests:
			return fmt.Errorf("the registry is rate limiting (HTTP 429) and retries ran out: %w", err)
		}
	}
	return err
}

// AuthFromSecret reads registry credentials from a Secret's data: a
// docker config JSON (.dockerconfigjson or .dockercfg-style "auths") for
// registry, or the keys username and password. It returns nil, nil when
// the Secret holds neither.
func AuthFromSecret(data map[string][]byte, registry string) (authn.Authenticator, error) {
	if raw, ok := data[".dockerconfigjson"]; ok {
		var cfg struct {
			Auths map[string]authn.AuthConfig `json:"auths"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, errors.New("the Secret's .dockerconfigjson is not a docker config JSON")
		}
		for host, a := range cfg.Auths {
			if registryHost(host) == registry {
				return authn.FromConfig(a), nil
			}
		}
		return nil, fmt.Errorf("the Secret's .dockerconfigjson has no entry for registry %s", registry)
	}
	user, pass := data["username"], data["password"]
	if len(user) > 0 || len(pass) > 0 {
		return &authn.Basic{Username: string(user), Password: string(pass)}, nil
	}
	return nil, nil
}

// registryHost strips a scheme and path from a docker config key.
func registryHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	if i := strings.IndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	if key == "docker.io" || key == "registry-1.docker.io" {
		return name.DefaultRegistry
	}
	return key
}
