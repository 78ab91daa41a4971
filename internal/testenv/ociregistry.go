package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of a Helm chart in an OCI registry, as `helm push` writes
// them.
const (
	HelmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	HelmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// OCIRegistry is go-containerregistry's in-process registry served over
// plain HTTP on loopback.
type OCIRegistry struct {
	// Host is 127.0.0.1:<port>.
	Host string
	// Username and Password, when set, are required as basic auth.
	Username, Password string

	blobGets atomic.Int64
	server   *httptest.Server
}

// BlobDownloads is how many blobs (configs, chart layers) the registry
// has served.
func (r *OCIRegistry) BlobDownloads() int { return int(r.blobGets.Load()) }

// NewOCIRegistry starts an empty registry for the test, requiring basic
// auth when username is not empty; it stops when the test ends.
func NewOCIRegistry(t testing.TB, username, password string) *OCIRegistry {
	t.Helper()
	r := &OCIRegistry{Username: username, Password: password}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.Username != "" {
			user, pass, ok := req.BasicAuth()
			if !ok || user != r.Username || pass != r.Password {
				w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.blobGets.Add(1)
		}
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(r.server.Close)
	r.Host = strings.TrimPrefix(r.server.URL, "http://")
	return r
}

// Close stops the registry: it becomes unreachable.
func (r *OCIRegistry) Close() { r.server.Close() }

// URL is the oci:// address of a repository in the registry.
func (r *OCIRegistry) URL(repository string) string {
	return "oci://" + r.Host + "/" + repository
}

// PushChart pushes a chart archive as `helm push` would — a config of
// media type HelmConfigMediaType and one layer of HelmChartMediaType —
// tagged with the version ("+" written as "_"), and returns the layer's
// digest ("sha256:<hex>").
func (r *OCIRegistry) PushChart(t testing.TB, repository, chart, version string, archive []byte) string {
	t.Helper()
	repo, err := name.NewRepository(r.Host+"/"+repository, name.Insecure)
	if err != nil {
		t.Fatalf("push chart: %v", err)
	}
	opts := []remote.Option{remote.WithAuth(authn.Anonymous)}
	if r.Username != "" {
		opts = []remote.Option{remote.WithAuth(&authn.Basic{Username: r.Username, Password: r.Password})}
	}
	config := static.NewLayer([]byte(fmt.Sprintf(`{"apiVersion":"v2","name":%q,"version":%q}`, chart, version)), HelmConfigMediaType)
	content := static.NewLayer(archive, HelmChartMediaType)
	var descs []v1.Descriptor
	for _, l := range []v1.Layer{config, content} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			t.Fatalf("push chart %s %s: %v", chart, version, err)
		}
		d, _ := l.Digest()
		size, _ := l.Size()
		mt, _ := l.MediaType()
		descs = append(descs, v1.Descriptor{MediaType: mt, Digest: d, Size: size})
	}
	manifest, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        descs[0],
		Layers:        descs[1:],
	})
	if err != nil {
		t.Fatalf("push chart %s %s: %v", chart, version, err)
	}
	tag := repo.Tag(strings.ReplaceAll(version, "+", "_"))
	if err := remote.Put(tag, rawManifest(manifest), opts...); err != nil {
		t.Fatalf("push chart %s %s: %v", chart, version, err)
	}
	return descs[1].Digest.String()
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
