package policy

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testRegistry is go-containerregistry's registry on loopback, wrapped to
// paginate tag lists with Link headers (as real registries do), to refuse
// requests without the right basic credentials when user is set, and to
// answer 429 to the first failures requests.
type testRegistry struct {
	*httptest.Server
	user, pass string
	failures   atomic.Int32
	requests   atomic.Int32
	pages      atomic.Int32
}

func newTestRegistry(t *testing.T) *testRegistry {
	r := &testRegistry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if r.failures.Load() > 0 {
			r.failures.Add(-1)
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		if r.user != "" && req.URL.Path != "/v2/" {
			if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
		}
		if strings.HasSuffix(req.URL.Path, "/tags/list") {
			r.pages.Add(1)
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, req)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			if n := req.URL.Query().Get("n"); n != "" {
				var page struct{ Tags []string }
				_ = jsonDecode(rec.Body.Bytes(), &page)
				if fmt.Sprint(len(page.Tags)) == n {
					q := url.Values{"n": {n}, "last": {page.Tags[len(page.Tags)-1]}}
					w.Header().Set("Link", fmt.Sprintf(`<%s?%s>; rel="next"`, req.URL.Path, q.Encode()))
				}
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *testRegistry) host() string { return strings.TrimPrefix(r.URL, "http://") }

// push pushes a small random image as repo:tag and returns its digest.
func (r *testRegistry) push(t *testing.T, repo, tag string) string {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(r.host()+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: r.user, Password: r.pass})); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func fastOptions() ScanOptions {
	o := DefaultScanOptions()
	o.RetryDelay = time.Millisecond
	o.RequestsPerSecond = 0
	return o
}

func TestScannerListsEveryPageOfTags(t *testing.T) {
	reg := newTestRegistry(t)
	for i := range 5 {
		reg.push(t, "app", fmt.Sprintf("1.0.%d", i))
	}
	opts := fastOptions()
	opts.PageSize = 2
	s := NewScanner(opts)
	tags, err := s.List(context.Background(), Target{Image: reg.host() + "/app", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 5 {
		t.Errorf("listed %v, want the 5 tags pushed", tags)
	}
	if got := reg.pages.Load(); got < 3 {
		t.Errorf("%d pages requested, want at least 3 (5 tags by 2)", got)
	}
}

func TestScannerResolvesTheDigestOfATag(t *testing.T) {
	reg := newTestRegistry(t)
	want := reg.push(t, "app", "1.2.3")
	got, err := NewScanner(fastOptions()).Digest(context.Background(), Target{Image: reg.host() + "/app", Insecure: true}, "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
}

func TestScannerRetriesWhenTheRegistryAsksToSlowDown(t *testing.T) {
	reg := newTestRegistry(t)
	reg.push(t, "app", "1.0.0")
	reg.failures.Store(2)
	tags, err := NewScanner(fastOptions()).List(context.Background(), Target{Image: reg.host() + "/app", Insecure: true})
	if err != nil {
		t.Fatalf("two 429 answers then success: %v", err)
	}
	if len(tags) != 1 {
		t.Errorf("tags %v, want [1.0.0]", tags)
	}
}

func TestScannerGivesUpAfterItsRetries(t *testing.T) {
	reg := newTestRegistry(t)
	reg.push(t, "app", "1.0.0")
	reg.failures.Store(1000)
	reg.requests.Store(0)
	opts := fastOptions()
	opts.Retries = 2
	_, err := NewScanner(opts).List(context.Background(), Target{Image: reg.host() + "/app", Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "429") {
		t.Fatalf("error = %v, want one saying the registry is rate limiting", err)
	}
	if n := reg.requests.Load(); n > 10 {
		t.Errorf("%d requests for 2 retries, want a bounded number", n)
	}
}

func TestScannerUsesTheSecretsCredentials(t *testing.T) {
	reg := newTestRegistry(t)
	reg.user, reg.pass = "robot", "s3cret-value"
	reg.push(t, "app", "1.0.0")

	tests := []struct {
		name    string
		data    map[string][]byte
		wantErr string
	}{
		{"basic auth keys", map[string][]byte{"username": []byte("robot"), "password": []byte("s3cret-value")}, ""},
		{"a docker config JSON", map[string][]byte{".dockerconfigjson": fmt.Appendf(nil,
			`{"auths":{%q:{"username":"robot","password":"s3cret-value"}}}`, "http://"+reg.host())}, ""},
		{"a wrong password", map[string][]byte{"username": []byte("robot"), "password": []byte("wrong-pass")}, "refused the credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth, err := AuthFromSecret(tt.data, reg.host())
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewScanner(fastOptions()).List(context.Background(), Target{Image: reg.host() + "/app", Insecure: true, Auth: auth})
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "wrong-pass") {
					t.Errorf("error %q shows the password", err)
				}
			}
		})
	}
}

func TestScannerRateLimitsPerRegistry(t *testing.T) {
	reg := newTestRegistry(t)
	reg.push(t, "app", "1.0.0")
	reg.requests.Store(0)
	opts := fastOptions()
	opts.RequestsPerSecond, opts.Burst = 20, 1
	s := NewScanner(opts)
	start := time.Now()
	for range 3 {
		if _, err := s.List(context.Background(), Target{Image: reg.host() + "/app", Insecure: true}); err != nil {
			t.Fatal(err)
		}
	}
	// A lower bound only: at 20 requests per second, n requests cannot
	// take less than (n-1)/20 s.
	n := reg.requests.Load()
	if floor := time.Duration(n-1) * time.Second / 20; time.Since(start) < floor {
		t.Errorf("%d requests in %s, faster than the limit of 20 per second allows (%s)", n, time.Since(start), floor)
	}
}

func jsonDecode(b []byte, v any) error { return json.Unmarshal(b, v) }
