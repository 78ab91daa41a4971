package apply_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/apply"
)

// receivedBytes counts the bytes of the API server's answers.
type receivedBytes struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (r receivedBytes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		resp.Body = countedBody{ReadCloser: resp.Body, n: r.n}
	}
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func TestObjectsWrittenIntoANewNamespaceAreNotSentBackByTheAPIServer(t *testing.T) {
	ns := env.Namespace(t)
	newNS := ns + "-new"
	cleanupClusterScoped(t, "v1", "Namespace", newNS)
	var received atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return receivedBytes{rt: rt, n: &received} })
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 10
	value := strings.Repeat("x", size)
	var mu sync.Mutex
	written := map[string]*metav1.PartialObjectMetadata{}
	m := newManagerWith(cl, ns, func(o *apply.Options) {
		o.Written = func(obj *metav1.PartialObjectMetadata) {
			mu.Lock()
			defer mu.Unlock()
			written[obj.Kind+"/"+obj.GetName()] = obj.DeepCopy()
		}
	})
	p := planOf(
		fromGitInto(t, ns, newNS, "namespaces/new.yaml", `{apiVersion: v1, kind: Namespace, metadata: {name: $NS}}`),
		fromGitInto(t, ns, newNS, "config/big.yaml", `{apiVersion: v1, kind: ConfigMap, metadata: {name: big, namespace: $NS}, data: {value: `+value+`}}`),
	)

	expectActions(t, applyOK(t, m, p), "Namespace/"+newNS+" Created", "ConfigMap/"+newNS+"/big Created")

	// Validated and written whole, answered with its metadata only: a
	// large first sync costs neither side the objects' bodies again.
	if got := received.Load(); got >= size {
		t.Errorf("the API server's answers were %d bytes, more than the ConfigMap's value (%d): an object was sent back whole", got, size)
	}
	live := get(t, "v1", "ConfigMap", newNS, "big")
	if v, _, _ := unstructured.NestedString(live.Object, "data", "value"); v != value {
		t.Errorf("the ConfigMap's value in the cluster is %d bytes, want %d", len(v), size)
	}
	// The agent recognises its own writes by what Written is told.
	got := written["ConfigMap/big"]
	if got == nil || got.GetUID() != live.GetUID() || got.GetResourceVersion() != live.GetResourceVersion() || got.GetNamespace() != newNS {
		t.Errorf("Written was told %v, want the UID %s and resourceVersion %s of ConfigMap %s/big", got, live.GetUID(), live.GetResourceVersion(), newNS)
	}
	// And the fields this write left, which the agent marks the state it
	// wrote by (drift.LiveMark) without waiting for its watch.
	if got != nil && !sameFieldSets(got.ManagedFields, live.GetManagedFields()) {
		t.Errorf("Written was told the managedFields %v, want those of the ConfigMap in the cluster, %v", got.ManagedFields, live.GetManagedFields())
	}
}

// sameFieldSets reports whether a and b list the same managers' field sets.
func sameFieldSets(a, b []metav1.ManagedFieldsEntry) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Manager != b[i].Manager || a[i].Operation != b[i].Operation ||
			a[i].FieldsV1 == nil || b[i].FieldsV1 == nil || string(a[i].FieldsV1.GetRawBytes()) != string(b[i].FieldsV1.GetRawBytes()) {
			return false
		}
	}
	return true
}
