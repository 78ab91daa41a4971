package v1alpha1

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// HoldAnnotation on a Sync holds it at one revision of its branch
// (`driftless hold`): the agent applies that revision instead of the
// branch's tip, and reverts drift to it, until the annotation is removed
// (`driftless release`). Its value is a Hold in JSON.
const HoldAnnotation = "driftless.dev/hold"

// HoldFieldManager is the field manager that writes HoldAnnotation, by
// server-side apply: a parent Sync that applies this Sync from git owns
// other fields, so its applies leave the hold in place.
const HoldFieldManager = "driftless-hold"

// Condition reasons of a held Sync.
const (
	// ReasonHeld (Ready=True): the Sync applied the revision it is held
	// at; newer commits of its branch wait for `driftless release`.
	ReasonHeld = "Held"
	// ReasonHoldRefused (Ready=False, Stalled): the hold names a
	// revision the agent will not apply (not in the branch's history,
	// not signed as spec.source.git.verify asks) or is not a Hold.
	ReasonHoldRefused = "HoldRefused"
)

// Hold is the value of HoldAnnotation.
// +kubebuilder:object:generate=false
type Hold struct {
	// Revision is the full commit hash the Sync is held at.
	Revision string `json:"revision"`
	// Reason says why, as the person who held it wrote it.
	Reason string `json:"reason"`
	// By is who held it (their user name, from a SelfSubjectReview).
	By string `json:"by"`
	// At is when.
	At time.Time `json:"at"`
	// Stamp, when set, is the agent's admission webhook's proof that it
	// wrote By (the request's user) and At: HoldStamp of the rest. A hold
	// without a stamp that checks out names who it claims.
	Stamp string `json:"stamp,omitempty"`
	// Verified is set by the agent once Stamp checks out; it is never
	// read from the annotation.
	Verified bool `json:"-"`
}

// Who says who held the Sync, as messages put it: "by jane" when the
// agent's admission webhook stamped it (Verified), "claimed by jane"
// otherwise (By is what the writer wrote).
func (h Hold) Who() string {
	if h.Verified {
		return "by " + h.By
	}
	return "claimed by " + h.By
}

// HoldStamp is the stamp of h on the Sync namespace/name with key: an
// HMAC-SHA256 of the Sync, revision, reason, by and at.
func HoldStamp(key []byte, namespace, name string, h Hold) string {
	mac := hmac.New(sha256.New, key)
	for _, part := range []string{"driftless.dev/hold", namespace, name, h.Revision, h.Reason, h.By, h.At.UTC().Format(time.RFC3339)} {
		fmt.Fprintf(mac, "%d:%s", len(part), part)
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// VerifyHoldStamp reports whether h's Stamp is HoldStamp's with key.
func VerifyHoldStamp(key []byte, namespace, name string, h Hold) bool {
	return len(key) > 0 && h.Stamp != "" && hmac.Equal([]byte(h.Stamp), []byte(HoldStamp(key, namespace, name, h)))
}

// MaxHoldReason bounds Hold.Reason, which conditions, events and commit
// statuses quote.
const MaxHoldReason = 200

// Value is h as HoldAnnotation's value.
func (h Hold) Value() string {
	b, err := json.Marshal(struct {
		Revision string `json:"revision"`
		Reason   string `json:"reason"`
		By       string `json:"by"`
		At       string `json:"at"`
		Stamp    string `json:"stamp,omitempty"`
	}{h.Revision, h.Reason, h.By, h.At.UTC().Format(time.RFC3339), h.Stamp})
	if err != nil {
		panic(err) // strings only
	}
	return string(b)
}

// Check reports what makes h unusable as a hold: a revision that is not a
// full commit hash, or a missing or too long reason.
func (h Hold) Check() error {
	var errs []error
	if !isCommitHash(h.Revision) {
		errs = append(errs, fmt.Errorf("revision %q is not a full commit hash (40 hexadecimal digits)", h.Revision))
	}
	if strings.TrimSpace(h.Reason) == "" {
		errs = append(errs, errors.New("reason is empty: say why the Sync is held"))
	}
	if len(h.Reason) > MaxHoldReason {
		errs = append(errs, fmt.Errorf("reason is %d bytes long, over %d", len(h.Reason), MaxHoldReason))
	}
	return errors.Join(errs...)
}

// HoldOf returns the hold of obj: nil when it has no HoldAnnotation, an
// error naming the annotation when its value is not a usable Hold.
func HoldOf(obj metav1.Object) (*Hold, error) {
	v, ok := obj.GetAnnotations()[HoldAnnotation]
	if !ok {
		return nil, nil
	}
	var h Hold
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		return nil, fmt.Errorf("annotation %s is not JSON with revision, reason, by and at: %w", HoldAnnotation, err)
	}
	if err := h.Check(); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", HoldAnnotation, err)
	}
	return &h, nil
}

func isCommitHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// HoldStatus is what a held Sync reports: the hold, and what waits in
// its branch.
type HoldStatus struct {
	// Revision is the commit the Sync is held at.
	Revision string `json:"revision"`
	// By is who held it; Reason why; Since when.
	By     string      `json:"by"`
	Reason string      `json:"reason"`
	Since  metav1.Time `json:"since"`
	// Tip is the commit the branch points to.
	// +optional
	Tip string `json:"tip,omitempty"`
	// Pending counts the commits of the branch after Revision, up to Tip:
	// what `driftless release` applies.
	// +optional
	Pending int `json:"pending,omitempty"`
}

// HoldApply is what `driftless hold` and `driftless release` apply to the
// Sync namespace/name by server-side apply as HoldFieldManager (with
// force): HoldAnnotation with h, or, when h is nil, without it (which
// removes the hold this manager wrote), and a sync request made at
// requested, so that the agent acts on it at once.
func HoldApply(namespace, name string, h *Hold, requested time.Time) *unstructured.Unstructured {
	annotations := map[string]any{RequestedAtAnnotation: FormatRequestedAt(requested)}
	if h != nil {
		annotations[HoldAnnotation] = h.Value()
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(),
		"kind":       SyncKind,
		"metadata":   map[string]any{"name": name, "namespace": namespace, "annotations": annotations},
	}}
}
