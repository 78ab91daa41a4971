package admission

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Anyone who reaches the webhook's port can send it a body: whatever it
// is, the handler answers without panicking.
func FuzzServeHTTP(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"UPDATE","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"driftless.dev/sync":"ns.s"},"annotations":{"driftless.dev/protect":"deny","driftless.dev/origin":"a.yaml#0@abc1234"}}},"oldObject":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"driftless.dev/sync":"ns.s"}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"2","operation":"DELETE","oldObject":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"driftless.dev/sync":"ns.s"},"annotations":{"driftless.dev/protect":"deny"}}}}}`))
	f.Add([]byte(`{"request":{"subResource":"scale","object":{},"oldObject":[]}}`))
	f.Add([]byte(`{}`))
	scheme := v1alpha1.NewScheme()
	sync := &v1alpha1.Sync{}
	sync.Namespace, sync.Name = "ns", "s"
	h := &Handler{Syncs: fake.NewClientBuilder().WithScheme(scheme).WithObjects(sync).Build()}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Errorf("status %d", rec.Code)
		}
	})
}
