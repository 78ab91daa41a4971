package reliability

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// holdLabel marks the objects whose writes a writeHold can hold.
const holdLabel = "reliability.driftless.dev/hold"

// writeHold is a validating admission webhook on loopback that holds the
// first real (not dry-run) write of an object labelled holdLabel in one
// namespace, once armed, until the test releases it. It is how a test
// knows for certain that a sync is in the middle of its writes: the
// request it holds is one the agent sent and waits for. Every other
// request is allowed at once.
type writeHold struct {
	mu      sync.Mutex
	ops     map[admissionv1.Operation]bool // armed for these operations
	held    chan string                    // receives "OPERATION name" when a write is held
	release chan struct{}
}

// newWriteHold registers the webhook for ns; it is removed when the
// test ends.
func newWriteHold(t *testing.T, ns string) *writeHold {
	t.Helper()
	h := &writeHold{}
	srv := httptest.NewTLSServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() {
		h.Release()
		srv.Close()
	})
	url := srv.URL + "/hold"
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	timeout := int32(30)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "hold.reliability.driftless.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      &url,
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{holdLabel: "true"}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := c.Create(context.Background(), cfg); err != nil {
		t.Fatalf("register the hold webhook: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cfg) })
	return h
}

// Arm makes the webhook hold the next real write with one of ops, and
// returns the channel that says which write it holds.
func (h *writeHold) Arm(ops ...admissionv1.Operation) <-chan string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = map[admissionv1.Operation]bool{}
	for _, op := range ops {
		h.ops[op] = true
	}
	h.held = make(chan string, 1)
	h.release = make(chan struct{})
	return h.held
}

// Release lets the held write go (its API server may be gone by then).
func (h *writeHold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		close(h.release)
		h.release = nil
	}
}

func (h *writeHold) serve(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	h.mu.Lock()
	hold := h.ops[req.Operation] && (req.DryRun == nil || !*req.DryRun)
	var release chan struct{}
	if hold {
		h.ops = nil // only the first
		h.held <- string(req.Operation) + " " + req.Name
		release = h.release
	}
	h.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(&review)
}
