package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/driftless/driftless/api/v1alpha1"
)

// A Sync whose health check expression does not compile, or costs too
// much, is refused when it is created or updated, naming the field; a
// good one, and every other write of a Sync, pass.
func TestReviewRefusesASyncWithBadHealthChecks(t *testing.T) {
	good := v1alpha1.HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase == 'Running'"}
	cases := []struct {
		name   string
		checks []v1alpha1.HealthCheck
		op     admissionv1.Operation
		sub    string
		want   string // empty: allowed
	}{
		{"good expressions pass", []v1alpha1.HealthCheck{good}, admissionv1.Create, "", ""},
		{"an expression that does not parse is refused on create",
			[]v1alpha1.HealthCheck{good, {APIVersion: "example.com/v1", Kind: "Gadget", Current: "true", Failed: "status.phase =="}}, admissionv1.Create, "",
			"Sync shop/fleet: spec.healthChecks[1].failed: ERROR: <input>:1:16: Syntax error"},
		{"a too costly expression is refused on update",
			[]v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.conditions.all(a, status.conditions.all(b, a == b))"}},
			admissionv1.Update, "", "Sync shop/fleet: spec.healthChecks[0].current: \"status.conditions.all(a, status.conditions.all(b, a == b))\" is too costly"},
		{"a status write is not the spec's", []v1alpha1.HealthCheck{{APIVersion: "example.com/v1", Kind: "Widget", Current: "("}}, admissionv1.Update, "status", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := v1alpha1.Sync{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Sync"},
				ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "shop"}, Spec: v1alpha1.SyncSpec{HealthChecks: tc.checks}}
			raw, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			review, err := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: "1", Operation: tc.op, SubResource: tc.sub, Namespace: "shop", Name: "fleet",
					Resource: metav1.GroupVersionResource{Group: "driftless.dev", Version: "v1alpha1", Resource: "syncs"},
					Object:   runtime.RawExtension{Raw: raw}},
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			(&Handler{}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(review)))
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
			}
			switch {
			case tc.want == "" && !out.Response.Allowed:
				t.Errorf("refused: %s", out.Response.Result.Message)
			case tc.want != "" && out.Response.Allowed:
				t.Errorf("allowed, want refused with %q", tc.want)
			case tc.want != "" && !strings.Contains(out.Response.Result.Message, tc.want):
				t.Errorf("refused with %q, want %q", out.Response.Result.Message, tc.want)
			}
		})
	}
}
