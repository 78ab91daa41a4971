package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/health"
	"github.com/driftless/driftless/internal/source"
)

// checkSpec returns what makes the Sync's spec unusable whatever the
// network and the cluster do, or nil: a label value too long for its
// objects, a malformed or unsupported git address, an SSH address without
// a deploy key, a branch or tag name git cannot hold, a health check
// expression that does not compile or costs too much. Each problem says
// which field to change and how; all of them are joined.
func checkSpec(s *v1alpha1.Sync, t *Tenancy) error {
	var errs []error
	if v := s.LabelValue(); len(v) > validation.LabelValueMaxLength {
		fix := fmt.Sprintf("recreate the Sync with a name of at most %d characters", validation.LabelValueMaxLength-len(s.Namespace)-1)
		if len(s.Namespace) >= validation.LabelValueMaxLength-1 {
			fix = fmt.Sprintf("create it in a namespace of at most %d characters", validation.LabelValueMaxLength-1-len(s.Name))
		}
		errs = append(errs, fmt.Errorf("the Sync's namespace and name make its objects' label %s=%s %d characters long, "+
			"over the %d a label value allows: %s", v1alpha1.SyncLabel, v, len(v), validation.LabelValueMaxLength, fix))
	}
	switch s.Spec.Source.Kind() {
	case v1alpha1.SourceOCI:
		errs = append(errs, checkOCISpec(s, t)...)
	default: // v1alpha1.SourceGit
		errs = append(errs, checkGitSpec(s, t)...)
	}
	// What does not depend on the kind of source is checked for every
	// kind: the health checks, and what a tenant may name beyond its
	// source.
	if _, err := health.Compile(s.Spec.HealthChecks); err != nil {
		errs = append(errs, err)
	}
	if t != nil && t.tenant(s) {
		errs = append(errs, t.refFences(s)...)
	}
	return errors.Join(errs...)
}

// checkGitSpec returns what is wrong with the git source of s (which
// checkSpec stalls on): a
// malformed or unsupported address, an SSH address without a deploy key,
// a ref git cannot hold, a host or protocol a tenant may not use.
func checkGitSpec(s *v1alpha1.Sync, t *Tenancy) []error {
	var errs []error
	g := s.Spec.Source.Git
	protocol, err := source.Protocol(g.URL)
	if err != nil {
		errs = append(errs, fmt.Errorf("spec.source.git.url %q %w", source.Redact(g.URL), err))
	}
	if protocol == source.ProtocolSSH && g.SecretRef == nil {
		errs = append(errs, fmt.Errorf("spec.source.git.url %q is an SSH address, which needs a deploy key: "+
			"set spec.source.git.secretRef to a Secret with identity and known_hosts keys, or use an https:// URL", source.Redact(g.URL)))
	}
	if err := source.CheckRef(source.Ref{Branch: g.Branch, Tag: g.Tag, Commit: g.Commit}); err != nil {
		errs = append(errs, err)
	}
	if t != nil && t.tenant(s) {
		errs = append(errs, t.gitFences(s, protocol)...)
	}
	return errs
}

// stallOnSpec records a spec that checkSpec refused: Ready=False and
// Stalled=True with reason (InvalidSpec, ServiceAccountRequired), a Warning event, and no requeue:
// only a change of the spec (a new generation) triggers the next attempt.
// A Sync already stalled on the same problem is not written again, unless
// a sync was requested (driftless reconcile waits for its record).
func (r *SyncReconciler) stallOnSpec(ctx context.Context, s *v1alpha1.Sync, reason string, err error) (ctrl.Result, error) {
	o := outcome{started: r.now(), reason: reason, err: err}
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == o.reason && c.Message == o.message() && c.ObservedGeneration == s.Generation &&
		!requestPending(s) {
		return ctrl.Result{}, nil
	}
	if err := r.writeStatus(ctx, s, o); err != nil {
		return ctrl.Result{}, fmt.Errorf("update status of Sync %s/%s: %w", s.Namespace, s.Name, err)
	}
	observeSync(s.Namespace+"/"+s.Name, o)
	observeFailure(s.Namespace+"/"+s.Name, o)
	log.FromContext(ctx).Error(err, "invalid spec; waiting for it to change", "reason", o.reason)
	r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, o.reason, "Sync", "%s", o.message())
	return ctrl.Result{}, nil
}
