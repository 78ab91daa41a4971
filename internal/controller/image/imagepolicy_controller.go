package image

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/image/policy"
)

// DefaultInterval is the scan interval of a policy without one.
const DefaultInterval = 5 * time.Minute

// EventRecorder records events on objects (events.k8s.io/v1).
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// PolicyReconciler scans the registry of each ImagePolicy and records the
// tag it selects in its status.
type PolicyReconciler struct {
	Client client.Client
	// Reader reads Secrets (uncached: the agent does not cache them).
	Reader   client.Reader
	Scanner  *policy.Scanner
	Recorder EventRecorder
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// SetupWithManager registers r with mgr.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ImagePolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Named("imagepolicy").
		Complete(r)
}

func (r *PolicyReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile scans one policy's registry.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p v1alpha1.ImagePolicy
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.Spec.Suspend {
		return ctrl.Result{}, nil
	}
	interval := p.Spec.Interval.Duration
	if interval <= 0 {
		interval = DefaultInterval
	}
	before := p.DeepCopy()
	o := r.scan(ctx, &p)
	p.Status.ObservedGeneration = p.Generation
	setConditions(&p.Status.Conditions, p.Generation, o)
	if o.reason != v1alpha1.ReasonTagSelected {
		r.Recorder.Eventf(&p, nil, corev1.EventTypeWarning, o.reason, "Scan", "%s", o.message)
	} else if before.Status.LatestTag != p.Status.LatestTag || before.Status.LatestDigest != p.Status.LatestDigest {
		r.Recorder.Eventf(&p, nil, corev1.EventTypeNormal, o.reason, "Scan", "%s", o.message)
	}
	if err := r.Client.Status().Patch(ctx, &p, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("ImagePolicy %s status update failed: %w", req.NamespacedName, err)
	}
	if o.stalled {
		return ctrl.Result{}, nil // fixed by a spec change, which is watched
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// outcome is the result of one scan, as conditions will show it.
type outcome struct {
	reason  string
	message string
	stalled bool
}

func (r *PolicyReconciler) scan(ctx context.Context, p *v1alpha1.ImagePolicy) outcome {
	compiled, err := policy.Compile(p.Spec)
	if err != nil {
		return outcome{reason: v1alpha1.ReasonInvalidSpec, message: err.Error(), stalled: true}
	}
	target := policy.Target{Image: p.Spec.Image, Insecure: p.Spec.Insecure}
	repo, err := target.Repository()
	if err != nil {
		return outcome{reason: v1alpha1.ReasonInvalidSpec, message: "spec.image: " + err.Error(), stalled: true}
	}
	if ref := p.Spec.SecretRef; ref != nil {
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}
		if err := r.Reader.Get(ctx, key, &secret); err != nil {
			return outcome{reason: v1alpha1.ReasonScanFailed, message: fmt.Sprintf("read the registry Secret %s: %v", key, err)}
		}
		auth, err := policy.AuthFromSecret(secret.Data, repo.RegistryStr())
		if err != nil {
			return outcome{reason: v1alpha1.ReasonScanFailed, message: fmt.Sprintf("registry Secret %s: %v", key, err)}
		}
		target.Auth = auth
	}
	tags, err := r.Scanner.List(ctx, target)
	if err != nil {
		return outcome{reason: v1alpha1.ReasonScanFailed, message: err.Error()}
	}
	now := metav1.NewTime(r.now())
	p.Status.LastScan = &now
	d := compiled.Select(tags)
	p.Status.TagsConsidered, p.Status.TagsSkipped = d.Considered, d.Skipped
	if d.Tag == "" {
		return outcome{reason: v1alpha1.ReasonNoMatchingTag, message: noMatchMessage(p, d)}
	}
	digest, err := r.Scanner.Digest(ctx, target, d.Tag)
	if err != nil {
		return outcome{reason: v1alpha1.ReasonScanFailed, message: err.Error()}
	}
	if p.Status.LatestTag != d.Tag || p.Status.LatestDigest != digest {
		p.Status.SeenAt = &now
	}
	p.Status.LatestTag, p.Status.LatestDigest = d.Tag, digest
	return outcome{reason: v1alpha1.ReasonTagSelected, message: fmt.Sprintf("selected %s:%s (%s) of %d tags", p.Spec.Image, d.Tag, digest, d.Considered)}
}

func noMatchMessage(p *v1alpha1.ImagePolicy, d policy.Decision) string {
	what := "the policy"
	if s := p.Spec.Policy.SemVer; s != nil {
		what = fmt.Sprintf("the range %q", s.Range)
	}
	msg := fmt.Sprintf("no tag of %s matches %s: %d tags listed", p.Spec.Image, what, d.Considered)
	if d.Skipped > 0 {
		msg += fmt.Sprintf(", %d of them not parsable under the policy", d.Skipped)
	}
	if p.Status.LatestTag != "" {
		msg += fmt.Sprintf("; keeping the last selection %s", p.Status.LatestTag)
	}
	return msg
}

// setConditions sets Ready and Stalled in kstatus style.
func setConditions(conds *[]metav1.Condition, generation int64, o outcome) {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: o.reason, Message: o.message, ObservedGeneration: generation}
	if o.reason == v1alpha1.ReasonTagSelected {
		ready.Status = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(conds, ready)
	if o.stalled {
		apimeta.SetStatusCondition(conds, metav1.Condition{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
			Reason: o.reason, Message: o.message, ObservedGeneration: generation})
	} else {
		apimeta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
	}
}
