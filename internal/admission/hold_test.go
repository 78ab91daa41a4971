package admission

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/driftless/driftless/api/v1alpha1"
)

func TestAStampedHoldNamesTheRequestsUserAndOnlyANewHoldIsStamped(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	st := &Stamper{Key: func() []byte { return key }, Now: func() time.Time { return now }}
	claimed := v1alpha1.Hold{Revision: strings.Repeat("ab", 20), Reason: "payment errors", By: "bob", At: now.Add(-time.Hour)}
	sync := func(hold string) runtime.RawExtension {
		s := v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
		if hold != "" {
			s.Annotations = map[string]string{v1alpha1.HoldAnnotation: hold}
		}
		raw, _ := json.Marshal(s)
		return runtime.RawExtension{Raw: raw}
	}
	req := func(old, cur string) *admissionv1.AdmissionRequest {
		return &admissionv1.AdmissionRequest{Resource: metav1.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Resource: "syncs"},
			Operation: admissionv1.Update, Namespace: "shop", Name: "web", UserInfo: authenticationv1.UserInfo{Username: "alice"},
			OldObject: sync(old), Object: sync(cur)}
	}
	patch, ok := st.patch(req("", claimed.Value()))
	if !ok {
		t.Fatal("a new hold was not stamped")
	}
	var ops []struct{ Op, Path, Value string }
	if err := json.Unmarshal(patch, &ops); err != nil || len(ops) != 1 || ops[0].Path != "/metadata/annotations/driftless.dev~1hold" {
		t.Fatalf("patch %s: %v", patch, err)
	}
	h, err := v1alpha1.HoldOf(&metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.HoldAnnotation: ops[0].Value}})
	if err != nil {
		t.Fatal(err)
	}
	if h.By != "alice" || !h.At.Equal(now) || !v1alpha1.VerifyHoldStamp(key, "shop", "web", *h) {
		t.Errorf("stamped hold %+v: want by alice at %s with a stamp that checks out", h, now)
	}
	if v1alpha1.VerifyHoldStamp(key, "shop", "other", *h) || v1alpha1.VerifyHoldStamp(key, "shop", "web", claimed) {
		t.Error("a stamp checks out for another Sync, or a hold without one checks out")
	}
	if _, ok := st.patch(req(ops[0].Value, ops[0].Value)); ok {
		t.Error("an update that leaves the hold as it is was stamped again")
	}
}
