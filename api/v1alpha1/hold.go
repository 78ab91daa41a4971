package v1alpha1

import (
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
	}{h.Revision, h.Reason, h.By, h.At.UTC().Format(time.RFC3339)})
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
