package charts

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/driftless/driftless/internal/source/oci"
)

// Limits a Fetcher applies when its own are zero.
const (
	DefaultMaxIndexSize int64 = 20 << 20 // index.yaml
	DefaultMaxChartSize int64 = 50 << 20 // one chart archive
)

// userAgent is sent with every request.
const userAgent = "driftless"

// Fetcher downloads charts into Dir and remembers repository indexes
// (with their ETag and Last-Modified) between calls. Use one Fetcher
// per cache directory; it is safe for concurrent use, including
// concurrent fetches of the same chart.
//
// Charts are cached per source and credentials, as git mirrors are: a
// chart downloaded from one repository with one Secret is found again
// only by a Ref that names the same repository with the same
// credentials. A Ref that names a cached digest in an index of its own,
// or the same repository without its credentials, downloads (and is
// refused) like any other.
type Fetcher struct {
	// Dir is the cache directory, created when missing. Charts are kept
	// as <scope>/sha256-<hex>.tgz, scope a digest of the source and the
	// credentials (no credential is written to disk); nothing else in it
	// is read.
	Dir string
	// Transport carries every request; nil is http.DefaultTransport.
	// A CA in the Credentials is trusted on a clone of it, so it must
	// then be an *http.Transport.
	Transport http.RoundTripper
	// MaxIndexSize and MaxChartSize bound what one response may hold;
	// zero is DefaultMaxIndexSize and DefaultMaxChartSize.
	MaxIndexSize, MaxChartSize int64
	// AfterDownload, when set, is called after a chart is downloaded
	// into the cache, on a goroutine of its own (the agent's
	// source.CacheLimit.Collect). A chart served from the cache has its
	// modification time set to now: the cache's last use.
	AfterDownload func()

	mu        sync.Mutex
	indexes   map[string]*repoIndex // by scope and index URL
	downloads atomic.Int64          // charts stored
}

// Fetch resolves ref's version, downloads the chart unless the cache
// holds its digest, verifies it and returns where it is. It makes one
// attempt, bounded by ctx; retrying is the caller's. On failure it
// returns an *Error (see the Err* kinds) or ctx's error, and the cache
// keeps whatever it held before.
func (f *Fetcher) Fetch(ctx context.Context, ref Ref) (Chart, error) {
	if err := ref.check(); err != nil {
		return Chart{}, &Error{Kind: ErrInvalidRef, Chart: ref.String(), msg: err.Error()}
	}
	if _, err := versionRange(ref.Version); err != nil {
		return Chart{}, failure(ErrInvalidRef, ref, fmt.Sprintf("chart %s: %v: check spec.chart.version", chartName(ref), err), nil)
	}
	if f.Dir == "" {
		return Chart{}, errors.New("chart fetcher has no cache directory")
	}
	field := "spec.chart.repository"
	if ref.OCI != "" {
		field = "spec.chart.oci"
	}
	if err := checkHost(ref, field+" "+ref.Source(), hostOf(ref)); err != nil {
		return Chart{}, err
	}
	dir := filepath.Join(f.Dir, cacheKey(ref))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Chart{}, fmt.Errorf("chart cache %s: %w", f.Dir, err)
	}
	var (
		c         Chart
		err       error
		downloads = f.downloads.Load()
	)
	if ref.OCI != "" {
		c, err = f.fetchOCI(ctx, ref, scope(dir))
	} else {
		c, err = f.fetchHTTP(ctx, ref, scope(dir))
	}
	if f.AfterDownload != nil && f.downloads.Load() != downloads {
		go f.AfterDownload()
	}
	if err != nil && ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Chart{}, failure(ErrUnreachable, ref, fmt.Sprintf("chart repository %s did not answer in time (chart %s)", hostOf(ref), chartName(ref)), ctx.Err())
		}
		return Chart{}, fmt.Errorf("fetch chart %s: %w", ref, ctx.Err())
	}
	return c, err
}

func (f *Fetcher) maxIndex() int64 {
	if f.MaxIndexSize > 0 {
		return f.MaxIndexSize
	}
	return DefaultMaxIndexSize
}

func (f *Fetcher) maxChart() int64 {
	if f.MaxChartSize > 0 {
		return f.MaxChartSize
	}
	return DefaultMaxChartSize
}

// roundTripper is the Transport, trusting the credentials' CA if any.
// When ref.Hosts restricts, every request it sends — a redirect, a
// registry's token endpoint, a download an index names — goes only to an
// allowed host.
func (f *Fetcher) roundTripper(ref Ref) (http.RoundTripper, error) {
	rt, err := f.transport(ref)
	if err != nil || !ref.Hosts.Restricts() {
		return rt, err
	}
	return hostsOnly{ref: ref, next: rt}, nil
}

// hostsOnly refuses a request to a host its ref's Hosts does not allow,
// before anything is sent.
type hostsOnly struct {
	ref  Ref
	next http.RoundTripper
}

func (h hostsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkHost(h.ref, "a request for chart "+chartName(h.ref), req.URL.Host); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return h.next.RoundTrip(req)
}

// transport is the Transport, trusting the credentials' CA if any.
func (f *Fetcher) transport(ref Ref) (http.RoundTripper, error) {
	base := f.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if len(ref.Credentials.CA) == 0 {
		return base, nil
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("chart fetcher: a CA needs an *http.Transport, not %T", base)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(ref.Credentials.CA) {
		return nil, failure(ErrInvalidRef, ref, fmt.Sprintf("chart %s: %s in the Secret named by spec.chart.secretRef holds no PEM certificate", chartName(ref), SecretKeyCA), nil)
	}
	t = t.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.RootCAs = pool
	return t, nil
}

// cacheKey names the part of the cache that holds the charts of ref's
// source read with ref's credentials: a digest of both.
func cacheKey(ref Ref) string {
	source := "repository=" + strings.TrimSuffix(ref.Repository, "/")
	if ref.OCI != "" {
		source = fmt.Sprintf("oci=%s insecure=%t", strings.TrimSuffix(ref.OCI, "/")+"|"+ref.Name, ref.Insecure)
	}
	c := ref.Credentials
	return oci.ScopeKey(source, []byte(c.Username), []byte(c.Password), []byte(c.Token), c.CA)
}

// scope is the directory of the cache that holds one source's charts read
// with one set of credentials.
type scope string

// path is where the chart with this sha256 (hex) is cached.
func (s scope) path(hexDigest string) string {
	return filepath.Join(string(s), "sha256-"+hexDigest+".tgz")
}

// cached reports whether the cache holds the chart with this digest,
// intact; a damaged file is removed so that it is downloaded again.
func (s scope) cached(hexDigest string) bool {
	p := s.path(hexDigest)
	file, err := os.Open(p)
	if err != nil {
		return false
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return false
	}
	if hex.EncodeToString(h.Sum(nil)) != hexDigest {
		_ = os.Remove(p)
		return false
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now) // its last use, for the cache's limit
	return true
}

var errTooLarge = errors.New("too large")

// store copies r (at most limit bytes) into the cache. When want is set
// and the content's sha256 differs, nothing is stored and got says what
// arrived. The file appears under its digest atomically: a concurrent
// reader sees the whole chart or none.
func (s scope) store(r io.Reader, limit int64, want string) (got string, n int64, err error) {
	tmp, err := os.CreateTemp(string(s), ".download-*")
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err = io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, limit+1))
	got = hex.EncodeToString(h.Sum(nil))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return got, n, err
	case n > limit:
		return "", n, errTooLarge
	case want != "" && got != want:
		return got, n, errDigestMismatch
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return got, n, err
	}
	return got, n, os.Rename(tmp.Name(), s.path(got))
}

var errDigestMismatch = errors.New("digest mismatch")

// normalDigest returns the hex of a "sha256:<hex>" or bare hex digest,
// or "" when it is not one.
func normalDigest(d string) string {
	d = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(d)), "sha256:")
	if len(d) != sha256.Size*2 {
		return ""
	}
	if _, err := hex.DecodeString(d); err != nil {
		return ""
	}
	return d
}

// mismatch words a digest mismatch.
func mismatch(ref Ref, name, version, want, got string) *Error {
	return failure(ErrDigestMismatch, ref, fmt.Sprintf(
		"chart %s %s from %s does not match its digest: expected sha256:%s, got sha256:%s: the repository serves a different archive than it lists; nothing was used",
		name, version, ref.Source(), want, got), nil)
}

// tooLarge words a size limit.
func tooLarge(ref Ref, what string, limit int64) *Error {
	size := fmt.Sprintf("%d bytes", limit)
	if limit >= 1<<20 {
		size = fmt.Sprintf("%d MiB", limit>>20)
	}
	return failure(ErrTooLarge, ref, fmt.Sprintf("%s from %s is larger than %s: refusing it", what, ref.Source(), size), nil)
}
