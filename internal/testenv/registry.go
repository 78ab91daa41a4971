package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is go-containerregistry's in-process registry on a loopback
// httptest server, wrapped to behave like a real one where tests need it:
// tag lists are paginated with Link headers, requests can be made to need
// basic credentials, and the next answers can be made 429.
type Registry struct {
	srv *httptest.Server

	mu         sync.Mutex
	user, pass string

	failures atomic.Int32
	requests atomic.Int32
	pages    atomic.Int32
}

// NewRegistry starts a registry, stopped when t ends.
func NewRegistry(t testing.TB) *Registry {
	r := &Registry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.serve(inner, w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// Host is host:port, the registry part of an image name.
func (r *Registry) Host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// RequireAuth makes every request but the /v2/ probe need these basic
// credentials.
func (r *Registry) RequireAuth(user, pass string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.pass = user, pass
}

// FailNext makes the next n requests answer 429 Too Many Requests.
func (r *Registry) FailNext(n int) { r.failures.Store(int32(n)) }

// Requests is the number of requests served (and ResetRequests zeroes it).
func (r *Registry) Requests() int { return int(r.requests.Load()) }

// ResetRequests zeroes the counts of requests and tag list pages.
func (r *Registry) ResetRequests() { r.requests.Store(0); r.pages.Store(0) }

// TagPages is the number of tag list pages served.
func (r *Registry) TagPages() int { return int(r.pages.Load()) }

// Push pushes a small random image as repo:tag and returns its digest.
func (r *Registry) Push(t testing.TB, repo, tag string) string {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(r.Host()+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	auth := &authn.Basic{Username: r.user, Password: r.pass}
	r.mu.Unlock()
	if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func (r *Registry) serve(inner http.Handler, w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	if r.failures.Load() > 0 {
		r.failures.Add(-1)
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	r.mu.Lock()
	user, pass := r.user, r.pass
	r.mu.Unlock()
	if user != "" && req.URL.Path != "/v2/" {
		if u, p, ok := req.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="testenv"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
	}
	if !strings.HasSuffix(req.URL.Path, "/tags/list") {
		inner.ServeHTTP(w, req)
		return
	}
	r.pages.Add(1)
	rec := httptest.NewRecorder()
	inner.ServeHTTP(rec, req)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	if n := req.URL.Query().Get("n"); n != "" && rec.Code == http.StatusOK {
		var page struct{ Tags []string }
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err == nil && len(page.Tags) > 0 && fmt.Sprint(len(page.Tags)) == n {
			q := url.Values{"n": {n}, "last": {page.Tags[len(page.Tags)-1]}}
			w.Header().Set("Link", fmt.Sprintf(`<%s?%s>; rel="next"`, req.URL.Path, q.Encode()))
		}
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}
