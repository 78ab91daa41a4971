package charts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/driftless/driftless/internal/source"
	"github.com/driftless/driftless/internal/source/charts"
	"github.com/driftless/driftless/internal/testenv"
)

func fetchCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// publishWeb publishes web 1.2.0, 1.3.0 and 2.0.0 and returns their archives.
func publishWeb(t *testing.T, repo *testenv.ChartRepo) map[string][]byte {
	t.Helper()
	archives := map[string][]byte{}
	for _, v := range []string{"1.2.0", "1.3.0", "2.0.0"} {
		archives[v] = testenv.PackageChart(t, "web", v)
		repo.Publish("web", v, archives[v])
	}
	return archives
}

func assertCached(t *testing.T, c charts.Chart, want []byte) {
	t.Helper()
	got, err := os.ReadFile(c.Path)
	if err != nil {
		t.Fatalf("read the fetched chart: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the cached archive %s is not the published one", c.Path)
	}
	if base := filepath.Base(c.Path); base != strings.Replace(c.Digest, ":", "-", 1)+".tgz" {
		t.Errorf("cached file %s is not named by its digest %s", base, c.Digest)
	}
}

func TestHTTPRangePicksHighestMatchAndANewVersionAtTheNextFetch(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	archives := publishWeb(t, repo)
	f := &charts.Fetcher{Dir: t.TempDir()}
	ref := charts.Ref{Repository: repo.URL, Name: "web", Version: ">=1.2 <2"}

	c, err := f.Fetch(ctx, ref)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if c.Name != "web" || c.Version != "1.3.0" {
		t.Errorf("fetched %s %s, want web 1.3.0", c.Name, c.Version)
	}
	assertCached(t, c, archives["1.3.0"])

	again, err := f.Fetch(ctx, ref)
	if err != nil {
		t.Fatalf("second fetch: %v", err)
	}
	if again != c {
		t.Errorf("second fetch = %+v, want %+v", again, c)
	}
	if n := repo.Downloads(); n != 1 {
		t.Errorf("the repository served %d chart downloads, want 1: a cached digest must not be downloaded again", n)
	}

	newer := testenv.PackageChart(t, "web", "1.4.0")
	digest := repo.Publish("web", "1.4.0", newer)
	c, err = f.Fetch(ctx, ref)
	if err != nil {
		t.Fatalf("fetch after publishing 1.4.0: %v", err)
	}
	if c.Version != "1.4.0" || c.Digest != digest {
		t.Errorf("after publishing 1.4.0 fetched %s (%s), want 1.4.0 (%s)", c.Version, c.Digest, digest)
	}
	assertCached(t, c, newer)
}

func TestHTTPVersions(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	publishWeb(t, repo)
	repo.Publish("web", "2.1.0-rc.1", testenv.PackageChart(t, "web", "2.1.0-rc.1"))
	f := &charts.Fetcher{Dir: t.TempDir()}

	for _, tc := range []struct {
		name, version, want string
	}{
		{"an exact version is that version", "1.2.0", "1.2.0"},
		{"no version is the highest stable one", "", "2.0.0"},
		{"a tilde range stays in its minor", "~1.2", "1.2.0"},
		{"a prerelease is picked only by a range that asks for one", ">=2.1.0-0", "2.1.0-rc.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := f.Fetch(ctx, charts.Ref{Repository: repo.URL, Name: "web", Version: tc.version})
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			if c.Version != tc.want {
				t.Errorf("version %q fetched %s, want %s", tc.version, c.Version, tc.want)
			}
		})
	}
}

func TestHTTPFailures(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	publishWeb(t, repo)
	f := &charts.Fetcher{Dir: t.TempDir()}

	for _, tc := range []struct {
		name     string
		ref      charts.Ref
		kind     error
		contains []string
	}{
		{
			name:     "a range no version matches lists the available versions",
			ref:      charts.Ref{Repository: repo.URL, Name: "web", Version: ">=3"},
			kind:     charts.ErrNoMatchingVersion,
			contains: []string{`">=3"`, "2.0.0, 1.3.0, 1.2.0", "spec.chart.version"},
		},
		{
			name:     "a chart the index does not list names the charts it has",
			ref:      charts.Ref{Repository: repo.URL, Name: "api"},
			kind:     charts.ErrChartNotFound,
			contains: []string{"api", "web", "spec.chart.name"},
		},
		{
			name:     "a version that is not a range says how to write one",
			ref:      charts.Ref{Repository: repo.URL, Name: "web", Version: "one point two"},
			kind:     charts.ErrInvalidRef,
			contains: []string{"one point two", "spec.chart.version"},
		},
		{
			name:     "a repository URL with credentials in it is refused",
			ref:      charts.Ref{Repository: "https://user:hunter2hunter2@charts.example.com", Name: "web"},
			kind:     charts.ErrInvalidRef,
			contains: []string{"secretRef"},
		},
		{
			name:     "a directory without an index is not a Helm repository",
			ref:      charts.Ref{Repository: repo.URL + "/nothing-here", Name: "web"},
			kind:     charts.ErrChartNotFound,
			contains: []string{"index.yaml", "spec.chart.repository"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Fetch(ctx, tc.ref)
			assertFailure(t, err, tc.kind, tc.contains...)
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func assertFailure(t *testing.T, err error, kind error, contains ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error = %v, want one of kind %q", err, kind)
	}
	t.Logf("error: %v", err)
	var fe *charts.Error
	if !errors.As(err, &fe) {
		t.Errorf("error %v is not a *charts.Error", err)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestHTTPDigestMismatchIsRefusedAndNothingIsCached(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	listed := repo.Publish("web", "1.2.0", testenv.PackageChart(t, "web", "1.2.0"))
	repo.Replace("web", "1.2.0", testenv.PackageChart(t, "evil", "1.2.0"))
	dir := t.TempDir()
	f := &charts.Fetcher{Dir: dir}

	_, err := f.Fetch(ctx, charts.Ref{Repository: repo.URL, Name: "web", Version: "1.2.0"})
	assertFailure(t, err, charts.ErrDigestMismatch, "web", "1.2.0", "expected "+listed, "got sha256:")
	left, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(left) != 0 {
		t.Errorf("the cache holds %v after a refused download, want nothing", left)
	}
}

func TestHTTPBasicAuth(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	repo.Username, repo.Password = "reader", "right-password-1"
	publishWeb(t, repo)
	f := &charts.Fetcher{Dir: t.TempDir()}
	ref := charts.Ref{Repository: repo.URL, Name: "web", Version: "1.2.0"}

	ref.Credentials = charts.CredentialsFromSecret(map[string][]byte{"username": []byte("reader"), "password": []byte("wrong-password-1")})
	_, err := f.Fetch(ctx, ref)
	assertFailure(t, err, charts.ErrUnauthorized, "401", "spec.chart.secretRef")
	if strings.Contains(err.Error(), "wrong-password-1") {
		t.Errorf("the error shows the password: %v", err)
	}

	ref.Credentials = charts.CredentialsFromSecret(map[string][]byte{"username": []byte("reader"), "password": []byte("right-password-1")})
	if _, err := f.Fetch(ctx, ref); err != nil {
		t.Errorf("fetch with the right password: %v", err)
	}
}

func TestHTTPUnreachableRepositoryKeepsTheCachedChart(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	publishWeb(t, repo)
	f := &charts.Fetcher{Dir: t.TempDir()}
	ref := charts.Ref{Repository: repo.URL, Name: "web", Version: "1.x"}
	good, err := f.Fetch(ctx, ref)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(repo.URL, "/repo"), "http://")
	repo.Close()

	_, err = f.Fetch(ctx, ref)
	assertFailure(t, err, charts.ErrUnreachable, "chart repository "+host+" is unreachable")
	if strings.Contains(err.Error(), "index.yaml") {
		t.Errorf("the error quotes the request URL: %v", err)
	}
	if _, err := os.Stat(good.Path); err != nil {
		t.Errorf("the last good chart left the cache: %v", err)
	}
}

func TestHTTPChartLargerThanTheLimitIsRefused(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	publishWeb(t, repo)
	f := &charts.Fetcher{Dir: t.TempDir(), MaxChartSize: 100}
	_, err := f.Fetch(ctx, charts.Ref{Repository: repo.URL, Name: "web"})
	assertFailure(t, err, charts.ErrTooLarge, "chart web 2.0.0")
}

func TestConcurrentFetchesOfOneChartAllSeeTheWholeArchive(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	archives := publishWeb(t, repo)
	dir := t.TempDir()
	ref := charts.Ref{Repository: repo.URL, Name: "web", Version: "~1.3"}

	// While the fetches run, whoever opens the chart sees all of it.
	sum := sha256.Sum256(archives["1.3.0"])
	final := "sha256-" + hex.EncodeToString(sum[:]) + ".tgz"
	done := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-done:
				return
			default:
			}
			found, _ := filepath.Glob(filepath.Join(dir, "*", final))
			for _, p := range found {
				if data, err := os.ReadFile(p); err == nil && !bytes.Equal(data, archives["1.3.0"]) {
					t.Errorf("a reader saw a torn chart: %d of %d bytes", len(data), len(archives["1.3.0"]))
					return
				}
			}
		}
	}()

	const n = 8
	results := make([]charts.Chart, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		// Fetchers apart, as two agents sharing a cache, and one shared.
		f := &charts.Fetcher{Dir: dir}
		wg.Go(func() { results[i], errs[i] = f.Fetch(ctx, ref) })
	}
	shared := &charts.Fetcher{Dir: dir}
	for range n {
		wg.Go(func() {
			if _, err := shared.Fetch(ctx, ref); err != nil {
				t.Errorf("fetch: %v", err)
			}
		})
	}
	wg.Wait()
	close(done)
	<-readerDone
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("fetch %d: %v", i, errs[i])
		}
		assertCached(t, results[i], archives["1.3.0"])
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*", ".download-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left in the cache: %v", left)
	}
}

func TestHTTPSRepositoryIsTrustedWithTheSecretsCA(t *testing.T) {
	ctx := fetchCtx(t)
	repo, ca := testenv.NewTLSChartRepo(t)
	publishWeb(t, repo)
	f := &charts.Fetcher{Dir: t.TempDir()}
	ref := charts.Ref{Repository: repo.URL, Name: "web", Version: "1.2.0"}

	_, err := f.Fetch(ctx, ref)
	assertFailure(t, err, charts.ErrUnreachable, "certificate")

	ref.Credentials = charts.CredentialsFromSecret(map[string][]byte{"ca.crt": ca})
	if _, err := f.Fetch(ctx, ref); err != nil {
		t.Errorf("fetch trusting the Secret's CA: %v", err)
	}

	ref.Credentials = charts.CredentialsFromSecret(map[string][]byte{"ca.crt": []byte("not a certificate")})
	_, err = f.Fetch(ctx, ref)
	assertFailure(t, err, charts.ErrInvalidRef, "ca.crt", "spec.chart.secretRef")
}

func TestHTTPRepositoryThatDoesNotAnswerInTimeIsUnreachable(t *testing.T) {
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(stuck.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	f := &charts.Fetcher{Dir: t.TempDir()}
	_, err := f.Fetch(ctx, charts.Ref{Repository: stuck.URL, Name: "web"})
	assertFailure(t, err, charts.ErrUnreachable, strings.TrimPrefix(stuck.URL, "http://"), "did not answer in time")
}

func TestAChartCachedForOneRepositoryAndSecretIsNotGivenToAnother(t *testing.T) {
	ctx := fetchCtx(t)
	// Tenant A's private repository, read with A's Secret.
	private := testenv.NewChartRepo(t)
	private.Username, private.Password = "team-a", "team-a-password"
	secret := testenv.PackageChart(t, "web", "1.2.0")
	digest := private.Publish("web", "1.2.0", secret)
	f := &charts.Fetcher{Dir: t.TempDir()}
	a := charts.Ref{Repository: private.URL, Name: "web", Version: "1.2.0",
		Credentials: charts.CredentialsFromSecret(map[string][]byte{"username": []byte("team-a"), "password": []byte("team-a-password")})}
	if _, err := f.Fetch(ctx, a); err != nil {
		t.Fatalf("tenant A's fetch: %v", err)
	}

	// Tenant B's own repository lists the digest of A's chart, which B
	// only knows of, and serves something else.
	own := testenv.NewChartRepo(t)
	if got := own.Publish("web", "1.2.0", secret); got != digest {
		t.Fatalf("digests differ: %s, %s", got, digest)
	}
	own.Replace("web", "1.2.0", testenv.PackageChart(t, "mine", "1.2.0"))
	_, err := f.Fetch(ctx, charts.Ref{Repository: own.URL, Name: "web", Version: "1.2.0"})
	assertFailure(t, err, charts.ErrDigestMismatch, "expected "+digest)

	// B names A's repository without A's Secret, or with another.
	b := charts.Ref{Repository: private.URL, Name: "web", Version: "1.2.0"}
	_, err = f.Fetch(ctx, b)
	assertFailure(t, err, charts.ErrUnauthorized, "401")
	b.Credentials = charts.CredentialsFromSecret(map[string][]byte{"username": []byte("team-b"), "password": []byte("team-b-password")})
	_, err = f.Fetch(ctx, b)
	assertFailure(t, err, charts.ErrUnauthorized, "401")
}

func TestAnOCIChartCachedForOneRegistryAndSecretIsNotGivenToAnother(t *testing.T) {
	ctx := fetchCtx(t)
	private := testenv.NewOCIRegistry(t, "team-a", "team-a-password")
	archive := testenv.PackageChart(t, "web", "1.2.0")
	private.PushChart(t, "charts/web", "web", "1.2.0", archive)
	f := &charts.Fetcher{Dir: t.TempDir()}
	a := charts.Ref{OCI: private.URL("charts/web"), Version: "1.2.0", Insecure: true,
		Credentials: charts.CredentialsFromSecret(map[string][]byte{"username": []byte("team-a"), "password": []byte("team-a-password")})}
	if _, err := f.Fetch(ctx, a); err != nil {
		t.Fatalf("tenant A's fetch: %v", err)
	}

	// Tenant B's registry holds the same chart: B reads its own copy.
	open := testenv.NewOCIRegistry(t, "", "")
	open.PushChart(t, "charts/web", "web", "1.2.0", archive)
	if _, err := f.Fetch(ctx, charts.Ref{OCI: open.URL("charts/web"), Version: "1.2.0", Insecure: true}); err != nil {
		t.Fatalf("tenant B's fetch from its own registry: %v", err)
	}
	if n := open.BlobDownloads(); n == 0 {
		t.Errorf("tenant B's registry served no blob: B was given the chart A's credentials fetched")
	}

	_, err := f.Fetch(ctx, charts.Ref{OCI: private.URL("charts/web"), Version: "1.2.0", Insecure: true})
	assertFailure(t, err, charts.ErrUnauthorized, "401")
}

func TestHostsOutsideTheAllowListAreNeverAsked(t *testing.T) {
	ctx := fetchCtx(t)
	repo := testenv.NewChartRepo(t)
	archive := testenv.PackageChart(t, "web", "1.2.0")
	repo.Publish("web", "1.2.0", archive)
	f := &charts.Fetcher{Dir: t.TempDir()}
	loopback, err := source.ParseHosts([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := source.ParseHosts([]string{"charts.example.com"})

	// The repository's own host.
	_, err = f.Fetch(ctx, charts.Ref{Repository: repo.URL, Name: "web", Version: "1.2.0", Hosts: other})
	assertFailure(t, err, charts.ErrHostNotAllowed, "spec.chart.repository", "127.0.0.1", "--tenant-source-hosts")
	if _, err := f.Fetch(ctx, charts.Ref{Repository: repo.URL, Name: "web", Version: "1.2.0", Hosts: loopback}); err != nil {
		t.Errorf("a repository on an allowed host: %v", err)
	}

	// An index on an allowed host (127.0.0.1) whose download URL names
	// another (localhost, the same machine): refused, never asked.
	var mu sync.Mutex
	asked := 0
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked++
		mu.Unlock()
		_, _ = w.Write(archive)
	}))
	t.Cleanup(elsewhere.Close)
	download := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1) + "/web-1.2.0.tgz"
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("apiVersion: v1\nentries:\n  web:\n  - name: web\n    version: 1.2.0\n    urls: [" + download + "]\n"))
	}))
	t.Cleanup(index.Close)
	_, err = f.Fetch(ctx, charts.Ref{Repository: index.URL, Name: "web", Version: "1.2.0", Hosts: loopback})
	assertFailure(t, err, charts.ErrHostNotAllowed, "download URL of chart web 1.2.0", "localhost")
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return asked
	}
	if n := count(); n != 0 {
		t.Errorf("the download host was asked %d times, want never", n)
	}

	// An allowed host that redirects the index, then the download, to
	// another: refused, the other never asked.
	for _, what := range []string{"/index.yaml", "/web-1.2.0.tgz"} {
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == what {
				http.Redirect(w, r, strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)+r.URL.Path, http.StatusFound)
				return
			}
			_, _ = w.Write([]byte("apiVersion: v1\nentries:\n  web:\n  - name: web\n    version: 1.2.0\n    urls: [web-1.2.0.tgz]\n"))
		}))
		_, err = (&charts.Fetcher{Dir: t.TempDir()}).Fetch(ctx, charts.Ref{Repository: redirecting.URL, Name: "web", Version: "1.2.0", Hosts: loopback})
		redirecting.Close()
		assertFailure(t, err, charts.ErrHostNotAllowed, "localhost", "--tenant-source-hosts")
	}
	if n := count(); n != 0 {
		t.Errorf("a host a redirect named was asked %d times, want never", n)
	}
}
