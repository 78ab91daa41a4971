package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"
)

// PackageChart returns the archive (.tgz, as `helm package` writes it)
// of a tiny chart: Chart.yaml, values.yaml and templates/cm.yaml, a
// ConfigMap named after the release whose data holds the chart version,
// so a render shows which version it came from.
func PackageChart(t testing.TB, name, version string) []byte {
	t.Helper()
	files := []struct{ path, body string }{
		{"Chart.yaml", fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\ntype: application\n", name, version)},
		{"values.yaml", "greeting: hello\n"},
		{"templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n" +
			"  chartVersion: {{ .Chart.Version | quote }}\n  greeting: {{ .Values.greeting | quote }}\n"},
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	modTime := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) // same bytes every time
	for _, f := range files {
		hdr := &tar.Header{Name: name + "/" + f.path, Mode: 0o644, Size: int64(len(f.body)), ModTime: modTime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("package chart %s %s: %v", name, version, err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatalf("package chart %s %s: %v", name, version, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("package chart %s %s: %v", name, version, err)
	}
	if err := gz.Close(); err != nil {
		t.Fatalf("package chart %s %s: %v", name, version, err)
	}
	return buf.Bytes()
}

// PackageChartFiles returns the archive of the chart made of files (paths
// relative to the chart directory: Chart.yaml, values.yaml,
// templates/...), packaged by the Helm SDK as helm package packages it.
func PackageChartFiles(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buffered []*archive.BufferedFile
	for name, body := range files {
		buffered = append(buffered, &archive.BufferedFile{Name: name, Data: []byte(body)})
	}
	c, err := chartloader.LoadFiles(buffered)
	if err != nil {
		t.Fatalf("package chart: %v", err)
	}
	path, err := chartutil.Save(c, t.TempDir())
	if err != nil {
		t.Fatalf("package chart %s: %v", c.Name(), err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("package chart %s: %v", c.Name(), err)
	}
	return data
}

// ChartRepo is an HTTP Helm repository on loopback: an index.yaml (with
// an ETag, answering If-None-Match with 304) and the chart archives it
// lists under relative URLs (charts/<name>-<version>.tgz).
type ChartRepo struct {
	// URL is the repository's address, http://127.0.0.1:<port>/repo.
	URL string
	// Username and Password, when set, are required as basic auth.
	Username, Password string

	mu        sync.Mutex
	entries   map[string][]chartEntry
	archives  map[string][]byte // by URL path
	downloads int
	withAuth  int
	server    *httptest.Server
}

type chartEntry struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	URLs    []string `json:"urls"`
	Digest  string   `json:"digest,omitempty"`
	Created string   `json:"created"`
}

// NewChartRepo starts an empty chart repository for the test; it stops
// when the test ends.
func NewChartRepo(t testing.TB) *ChartRepo {
	t.Helper()
	r := &ChartRepo{entries: map[string][]chartEntry{}, archives: map[string][]byte{}}
	r.server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.server.Close)
	r.URL = r.server.URL + "/repo"
	return r
}

// NewTLSChartRepo is NewChartRepo over HTTPS with a certificate of its
// own CA, returned as PEM (a Secret's ca.crt).
func NewTLSChartRepo(t testing.TB) (repo *ChartRepo, caPEM []byte) {
	t.Helper()
	r := &ChartRepo{entries: map[string][]chartEntry{}, archives: map[string][]byte{}}
	r.server = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.server.Close)
	r.URL = r.server.URL + "/repo"
	return r, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.server.Certificate().Raw})
}

// Publish adds a chart archive to the repository and its index, with the
// archive's sha256 as the index digest, and returns that digest
// ("sha256:<hex>").
func (r *ChartRepo) Publish(name, version string, archive []byte) string {
	sum := sha256.Sum256(archive)
	digest := hex.EncodeToString(sum[:])
	rel := fmt.Sprintf("charts/%s-%s.tgz", name, version)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives["/repo/"+rel] = archive
	r.entries[name] = append(r.entries[name], chartEntry{Name: name, Version: version, URLs: []string{rel}, Digest: digest, Created: "2024-01-01T00:00:00Z"})
	return "sha256:" + digest
}

// Replace serves other bytes for a published chart while the index keeps
// the old digest, as a tampered or corrupted repository would.
func (r *ChartRepo) Replace(name, version string, archive []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives[fmt.Sprintf("/repo/charts/%s-%s.tgz", name, version)] = archive
}

// Downloads is how many chart archives the repository has served.
func (r *ChartRepo) Downloads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.downloads
}

// Authorized is how many requests carried an Authorization header.
func (r *ChartRepo) Authorized() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.withAuth
}

// Close stops the server: the repository becomes unreachable.
func (r *ChartRepo) Close() { r.server.Close() }

func (r *ChartRepo) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.Header.Get("Authorization") != "" {
		r.withAuth++
	}
	if r.Username != "" || r.Password != "" {
		user, pass, ok := req.BasicAuth()
		if !ok || user != r.Username || pass != r.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	if req.URL.Path == "/repo/index.yaml" {
		index, err := r.index()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		sum := sha256.Sum256(index)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if req.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/x-yaml")
		_, _ = w.Write(index)
		return
	}
	archive, ok := r.archives[req.URL.Path]
	if !ok {
		http.NotFound(w, req)
		return
	}
	r.downloads++
	w.Header().Set("Content-Type", "application/gzip")
	_, _ = w.Write(archive)
}

func (r *ChartRepo) index() ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"entries":    r.entries,
		"generated":  "2024-01-01T00:00:00Z",
	})
}
