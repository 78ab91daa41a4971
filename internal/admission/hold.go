package admission

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driftless/driftless/api/v1alpha1"
)

// MutatePath is where the mutating webhook answers: it stamps holds.
const MutatePath = "/admission/hold"

// holdKeyEntry is the entry of Secret SecretName with the key that stamps
// holds; it is kept when the certificate is renewed.
const holdKeyEntry = "hold.key"

// Stamper answers AdmissionReview requests for creates and updates of
// Syncs: one that sets or changes driftless.dev/hold gets by set to the
// request's user and at to now, whatever the writer put there, and a
// stamp (v1alpha1.HoldStamp) the agent checks before it says who held the
// Sync. Any other request passes unchanged, and so does a hold that is
// not JSON (the agent refuses it, HoldRefused).
type Stamper struct {
	// Key returns the stamping key; empty: nothing is stamped.
	Key func() []byte
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// ServeHTTP decodes an admission.k8s.io/v1 AdmissionReview and answers it,
// always allowing the write.
func (st *Stamper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review, ok := readReview(w, r)
	if !ok {
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if patch, ok := st.patch(review.Request); ok {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	writeReview(w, review, resp)
}

// patch returns the JSON patch that stamps the hold req writes, if it
// sets or changes one.
func (st *Stamper) patch(req *admissionv1.AdmissionRequest) ([]byte, bool) {
	if req.Resource.Group != v1alpha1.GroupVersion.Group || req.Resource.Resource != "syncs" || req.SubResource != "" ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || st.Key == nil {
		return nil, false
	}
	key := st.Key()
	cur, old := holdValue(req.Object.Raw), holdValue(req.OldObject.Raw)
	if len(key) == 0 || cur == "" || cur == old {
		return nil, false
	}
	var h v1alpha1.Hold
	if err := json.Unmarshal([]byte(cur), &h); err != nil {
		return nil, false
	}
	now := time.Now
	if st.Now != nil {
		now = st.Now
	}
	h.By, h.At = req.UserInfo.Username, now().UTC().Truncate(time.Second)
	h.Stamp = v1alpha1.HoldStamp(key, req.Namespace, req.Name, h)
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(v1alpha1.HoldAnnotation, "~", "~0"), "/", "~1")
	patch, err := json.Marshal([]map[string]string{{"op": "replace", "path": path, "value": h.Value()}})
	if err != nil {
		return nil, false
	}
	return patch, true
}

// holdValue is the hold annotation of a raw Sync, "" for none.
func holdValue(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var m metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &m); err != nil {
		return ""
	}
	return m.Annotations[v1alpha1.HoldAnnotation]
}
