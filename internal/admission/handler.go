package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/origin"
)

// maxReviewBytes bounds an AdmissionReview body: an object and its old
// version, each at most the API server's ~3 MiB.
const maxReviewBytes = 8 << 20

// Handler answers AdmissionReview requests for writes of managed objects.
type Handler struct {
	// Syncs reads Syncs (the manager's cache).
	Syncs client.Reader
	// Objects reads the metadata of the object behind a scale subresource
	// write, whose Scale carries no labels; Mapper finds its kind.
	Objects client.Reader
	Mapper  meta.RESTMapper
	// Identity says whose writes pass silently.
	Identity Identity
}

// ServeHTTP decodes an admission.k8s.io/v1 AdmissionReview and answers it.
// A request it cannot read is answered 400; the API server then applies
// the webhook's failurePolicy (Ignore), so the write goes on.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review, ok := readReview(w, r)
	if !ok {
		return
	}
	d := h.Review(r.Context(), review.Request)
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: d.Allowed}
	if d.Warning != "" {
		resp.Warnings = []string{d.Warning}
	}
	if !d.Allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: d.Message}
	}
	writeReview(w, review, resp)
}

// readReview reads the AdmissionReview of r, answering 400 (and false)
// when it is not one with a request.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, bool) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReviewBytes))
	if err != nil {
		http.Error(w, "read the AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "the body is not an admission.k8s.io/v1 AdmissionReview with a request", http.StatusBadRequest)
		return nil, false
	}
	return &review, true
}

// writeReview answers review with resp.
func writeReview(w http.ResponseWriter, review *admissionv1.AdmissionReview, resp *admissionv1.AdmissionResponse) {
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = "admission.k8s.io/v1", "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Review decides one admission request: a Sync whose health checks do
// not compile is refused (DecideSync); a write of a managed object is
// decided by Decide. Whatever it cannot find out (a Sync it cannot read,
// an object that no longer exists) lets the write pass without a
// warning: the webhook advises, the agent enforces.
func (h *Handler) Review(ctx context.Context, req *admissionv1.AdmissionRequest) Decision {
	if d, ok := reviewSync(req); ok && !d.Allowed {
		return d
	}
	in, ok := h.input(ctx, req)
	if !ok {
		return Decision{Allowed: true}
	}
	return Decide(in, h.Identity)
}

// input gathers what Decide needs from the request, the Sync and (for a
// scale) the scaled object.
func (h *Handler) input(ctx context.Context, req *admissionv1.AdmissionRequest) (Input, bool) {
	in := Input{User: req.UserInfo.Username, Groups: req.UserInfo.Groups, FieldManager: fieldManager(req.Options.Raw), Delete: req.Operation == admissionv1.Delete,
		AgentImpersonation: slices.Contains(req.UserInfo.Extra[v1alpha1.AgentExtraKey], v1alpha1.AgentExtraValue)}
	// The writer is known before anything is read: the agent's own and
	// the cluster's writes cost no lookup.
	if passesSilently(in, h.Identity) {
		return Input{}, false
	}
	var cur metav1.Object
	var gvk schema.GroupVersionKind
	switch req.SubResource {
	case "":
		old, err := decode(req.OldObject.Raw)
		if err != nil {
			return Input{}, false
		}
		obj, err := decode(req.Object.Raw)
		if err != nil {
			return Input{}, false
		}
		if old == nil {
			old = obj // a create: what it will be (a delete has only the old object)
		}
		if old == nil {
			return Input{}, false
		}
		cur, gvk = old, old.GroupVersionKind()
		in.NoChange = obj != nil && unchanged(old, obj)
	case "scale":
		if h.Objects == nil || h.Mapper == nil {
			return Input{}, false
		}
		k, err := h.Mapper.KindFor(schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource})
		if err != nil {
			return Input{}, false
		}
		pm := &metav1.PartialObjectMetadata{}
		pm.SetGroupVersionKind(k)
		if err := h.Objects.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, pm); err != nil {
			return Input{}, false
		}
		cur, gvk = pm, k
		old, _ := decode(req.OldObject.Raw)
		obj, _ := decode(req.Object.Raw)
		in.NoChange = old != nil && obj != nil && equality.Semantic.DeepEqual(old.Object["spec"], obj.Object["spec"])
	default:
		return Input{}, false
	}
	in.Object = gvk.Kind + " " + cur.GetName()
	if cur.GetNamespace() != "" {
		in.Object = gvk.Kind + " " + cur.GetNamespace() + "/" + cur.GetName()
	}
	owner, managed := v1alpha1.SyncOf(cur)
	if !managed {
		return Input{}, false
	}
	in.Sync = owner.String()
	var s v1alpha1.Sync
	if err := h.Syncs.Get(ctx, owner, &s); err != nil {
		return in, true // not found or unreadable: SyncFound stays false
	}
	in.SyncFound = true
	in.SyncUser = SyncUser(s.Namespace, s.Spec.ServiceAccountName, h.Identity)
	switch {
	case s.Spec.Suspend:
		in.NotRevertedWhy = "the Sync is suspended"
	case !s.SelfHealEnabled():
		in.NotRevertedWhy = "self-heal is off"
	default:
		in.Reverted = true
	}
	if o, _, err := origin.Parse(cur.GetAnnotations()[v1alpha1.OriginAnnotation]); err == nil {
		in.File = o.Path
		if o.From != "" {
			in.File = o.From
		}
	}
	in.Protected = cur.GetAnnotations()[ProtectAnnotation] == ProtectDeny
	return in, true
}

// decode reads a raw object; nil for none.
func decode(raw []byte) (*unstructured.Unstructured, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("decode the object of the admission request: %w", err)
	}
	return u, nil
}

// unchanged reports whether a write changes nothing but bookkeeping.
func unchanged(old, cur *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		delete(c, "status")
		if md, ok := c["metadata"].(map[string]any); ok {
			for _, k := range []string{"resourceVersion", "managedFields", "generation"} {
				delete(md, k)
			}
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(old), strip(cur))
}

// fieldManager reads the field manager of the write's options.
func fieldManager(raw []byte) string {
	var o struct {
		FieldManager string `json:"fieldManager"`
	}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &o)
	}
	return o.FieldManager
}
