package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/image/policy"
	"github.com/driftless/driftless/internal/image/setters"
	"github.com/driftless/driftless/internal/image/update"
	"github.com/driftless/driftless/internal/source"
)

// Event reasons of image updates, on the Sync (defined in the API, where
// notifications read them).
const (
	ReasonImageUpdateCommitted = v1alpha1.ReasonImageUpdateCommitted
	ReasonImageUpdatePending   = v1alpha1.ReasonImageUpdatePending
	ReasonImageUpdateFailed    = v1alpha1.ReasonImageUpdateFailed
)

// defaultUpdateInterval is how often a Sync without an interval is
// checked for markers to update (policy changes also trigger it).
const defaultUpdateInterval = 5 * time.Minute

// UpdateReconciler runs the image update of each Sync with
// spec.imageUpdate: after any ImagePolicy changes, and at the Sync's
// interval.
type UpdateReconciler struct {
	Client client.Client
	// Reader reads Secrets (uncached).
	Reader client.Reader
	// ReaderOf, when set, returns what reads the Secrets a Sync names
	// (its git Secret, trusted keys and signing key) instead of Reader:
	// the Sync controller's ReaderOf, which reads as the Sync's
	// ServiceAccount outside the agent's namespace.
	ReaderOf func(*v1alpha1.Sync) (engine.Reader, error)
	// Scanner scans the registries of Flux v1 implied policies.
	Scanner  *policy.Scanner
	Recorder EventRecorder
	// CacheDir holds one scratch checkout per Sync.
	CacheDir string
	// Mirror is the agent's git mirror (nil: one per Sync in CacheDir).
	Mirror *source.Mirror
	// AgentNamespace is the agent's own namespace: a Sync in any other
	// namespace may use only the ImagePolicies of its own. Empty: every
	// Sync may use every policy.
	AgentNamespace string
	Now            func() time.Time
	// HTTPClient sends PullRequest mode's requests to the provider's API
	// (redirects are never followed); nil is a client with a timeout.
	HTTPClient *http.Client
}

// SetupWithManager registers r with mgr.
func (r *UpdateReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A Sync whose spec.imageUpdate was removed comes too: its status is
	// cleared.
	hasImageUpdate := predicate.NewPredicateFuncs(func(o client.Object) bool {
		s, ok := o.(*v1alpha1.Sync)
		return ok && (s.Spec.ImageUpdate != nil || s.Status.ImageUpdate != nil)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Sync{}, builder.WithPredicates(hasImageUpdate, predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ImagePolicy{}, handler.EnqueueRequestsFromMapFunc(r.syncsWithImageUpdate)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Named("imageupdate").
		Complete(r)
}

// syncsWithImageUpdate enqueues every Sync with spec.imageUpdate: a marker
// may name a policy in any namespace.
func (r *UpdateReconciler) syncsWithImageUpdate(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.SyncList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range list.Items {
		if s.Spec.ImageUpdate != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
		}
	}
	return reqs
}

func (r *UpdateReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile runs one image update of a Sync.
func (r *UpdateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1alpha1.Sync
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			forgetUpdates(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.Spec.ImageUpdate == nil && s.Status.ImageUpdate != nil && s.DeletionTimestamp.IsZero() {
		// Turned off: what it last said is no longer true.
		base := s.DeepCopy()
		s.Status.ImageUpdate = nil
		if err := r.Client.Status().Patch(ctx, &s, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("clear status.imageUpdate of Sync %s: %w", req.NamespacedName, err)
		}
		return ctrl.Result{}, nil
	}
	if s.Spec.ImageUpdate == nil || s.Spec.Suspend || !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	interval := s.Spec.Interval.Duration
	if interval <= 0 {
		interval = defaultUpdateInterval
	}
	out, forge, err := r.update(ctx, &s)
	status := &v1alpha1.ImageUpdateStatus{}
	if s.Status.ImageUpdate != nil {
		status.LastCommit = s.Status.ImageUpdate.LastCommit
	}
	now := metav1.NewTime(r.now())
	status.LastUpdate = &now
	// failures are the problems that are not a policy's first scan still
	// to come: only they make a Warning (and a notification).
	var failures []string
	for _, p := range out.Problems {
		status.Problems = append(status.Problems, p.Error())
		if !p.Waiting {
			failures = append(failures, p.Error())
		}
	}
	failed := func(err error) {
		status.Problems = append(status.Problems, err.Error())
		failures = append(failures, err.Error())
	}
	if err != nil {
		failed(err)
	}
	mode := s.Spec.ImageUpdate.ImageUpdateModeOrDefault()
	commit := mode == v1alpha1.ImageUpdateCommit
	switch {
	case mode == v1alpha1.ImageUpdatePullRequest:
		if s.Status.ImageUpdate != nil {
			// Kept across failed updates; dropped in the other modes.
			status.PullRequest = s.Status.ImageUpdate.PullRequest
		}
		if err != nil || forge == nil {
			break
		}
		if out.Pushed {
			status.LastCommit = out.Commit
			r.Recorder.Eventf(&s, nil, corev1.EventTypeNormal, ReasonImageUpdateCommitted, "ImageUpdate",
				"committed %s to branch %s on top of %s: %s", source.Short(out.Commit), r.branch(&s), source.Short(out.Revision), summary(out.Changes))
		}
		pr, err := r.propose(ctx, &s, forge, out)
		status.PullRequest = pr
		if err != nil {
			failed(err)
		}
	case commit && out.Commit != "":
		status.LastCommit = out.Commit
		r.Recorder.Eventf(&s, nil, corev1.EventTypeNormal, ReasonImageUpdateCommitted, "ImageUpdate",
			"committed %s to branch %s: %s", source.Short(out.Commit), r.branch(&s), summary(out.Changes))
	case !commit:
		status.Pending = out.Changes
		if len(out.Changes) > 0 && (s.Status.ImageUpdate == nil || !slices.Equal(s.Status.ImageUpdate.Pending, out.Changes)) {
			r.Recorder.Eventf(&s, nil, corev1.EventTypeNormal, ReasonImageUpdatePending, "ImageUpdate",
				"Report mode, nothing committed; would commit to branch %s: %s", r.branch(&s), summary(out.Changes))
		}
	}
	if len(failures) > 0 {
		r.Recorder.Eventf(&s, nil, corev1.EventTypeWarning, ReasonImageUpdateFailed, "ImageUpdate", "%s", strings.Join(failures, "; "))
	}
	observeUpdate(req.String(), commit && out.Commit != "" || mode == v1alpha1.ImageUpdatePullRequest && out.Pushed, len(failures))
	base := s.DeepCopy()
	s.Status.ImageUpdate = status
	if err := r.Client.Status().Patch(ctx, &s, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("update the status of Sync %s: %w", req.NamespacedName, err)
	}
	if commit && out.Commit != "" && r.branch(&s) == s.Spec.Source.Git.Branch {
		r.requestSync(ctx, &s)
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

func (r *UpdateReconciler) branch(s *v1alpha1.Sync) string {
	if b := s.Spec.ImageUpdate.Branch; b != "" {
		return b
	}
	if b := s.Spec.Source.Git.Branch; b != "" {
		return b
	}
	return "master"
}

// requestSync asks the Sync controller to sync now, so the commit is
// applied without waiting for the interval.
func (r *UpdateReconciler) requestSync(ctx context.Context, s *v1alpha1.Sync) {
	patch := client.MergeFrom(s.DeepCopy())
	annotations := s.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.RequestedAtAnnotation] = v1alpha1.FormatRequestedAt(r.now())
	s.SetAnnotations(annotations)
	_ = r.Client.Patch(ctx, s, patch) // the interval still applies the commit
}

// update runs the image update of s; in PullRequest mode it also returns
// the provider API the request is opened with (nil on an error: nothing
// is pushed without a usable token).
func (r *UpdateReconciler) update(ctx context.Context, s *v1alpha1.Sync) (update.Outcome, *update.Forge, error) {
	var reader engine.Reader = r.Reader
	if r.ReaderOf != nil {
		var err error
		if reader, err = r.ReaderOf(s); err != nil {
			return update.Outcome{}, nil, err
		}
	}
	req, err := engine.SourceRequest(ctx, reader, s)
	if err != nil {
		return update.Outcome{}, nil, err
	}
	u := s.Spec.ImageUpdate
	mode := u.ImageUpdateModeOrDefault()
	commit := mode != v1alpha1.ImageUpdateReport
	var forge *update.Forge
	if mode == v1alpha1.ImageUpdatePullRequest {
		if forge, err = r.forge(ctx, reader, s); err != nil {
			return update.Outcome{}, nil, fmt.Errorf("nothing pushed: %w", err)
		}
		req.Ref.Branch = pullRequestBase(s)
	}
	key, keyErr := r.signingKey(ctx, reader, s)
	if keyErr != nil && commit {
		return update.Outcome{}, nil, fmt.Errorf("nothing committed: %w", keyErr)
	}
	out, err := update.Run(ctx, update.Request{
		Source:   req,
		Branch:   u.Branch,
		Paths:    s.Spec.Paths,
		Commit:   commit,
		Author:   author(u.Author),
		Message:  u.Message,
		Dir:      filepath.Join(r.CacheDir, "image-update", s.Namespace, s.Name),
		Now:      r.Now,
		SignKey:  key,
		Mirror:   r.Mirror,
		FromBase: forge != nil,
	}, r.lookup(ctx, s))
	// In Report mode a bad key is reported beside what would be
	// committed, before Commit mode needs it.
	return out, forge, errors.Join(err, keyErr)
}

// signingKey reads the key of spec.imageUpdate.signingKey, nil when the
// Sync sets none. Its errors never hold key material.
func (r *UpdateReconciler) signingKey(ctx context.Context, reader engine.Reader, s *v1alpha1.Sync) (*openpgp.Entity, error) {
	ref := s.Spec.ImageUpdate.SigningKey
	if ref == nil {
		return nil, nil
	}
	name := s.Namespace + "/" + ref.SecretRef.Name
	var secret corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: ref.SecretRef.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &source.SigningKeyError{Err: fmt.Errorf("signing key Secret %s does not exist: create it with an armored OpenPGP private key under %s, or remove spec.imageUpdate.signingKey", name, source.SigningKeyEntry)}
		}
		return nil, fmt.Errorf("read signing key Secret %s: %w", name, err)
	}
	return source.ParseSigningKey(name, secret.Data, r.now())
}

// lookup answers the markers of s, fenced to s's namespace when s is a
// tenant's.
func (r *UpdateReconciler) lookup(ctx context.Context, s *v1alpha1.Sync) *clusterLookup {
	l := &clusterLookup{ctx: ctx, client: r.Client, scanner: r.Scanner, implied: map[string]impliedResult{}}
	if r.AgentNamespace != "" && s.Namespace != r.AgentNamespace {
		l.fence = s.Namespace
	}
	return l
}

func author(a *v1alpha1.CommitAuthor) v1alpha1.CommitAuthor {
	if a == nil {
		return update.DefaultAuthor
	}
	return *a
}

func summary(changes []v1alpha1.ImageChange) string {
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		parts = append(parts, fmt.Sprintf("%s:%d %s -> %s (%s)", c.File, c.Line, c.Old, c.New, c.Policy))
	}
	return strings.Join(parts, ", ")
}

// clusterLookup answers the rewriter from the ImagePolicies in the
// cluster, and scans the registries of Flux v1 implied policies (each
// once per update).
type clusterLookup struct {
	ctx     context.Context
	client  client.Client
	scanner *policy.Scanner
	implied map[string]impliedResult
	// fence, when set, is the only namespace whose policies may be read.
	fence string
}

type impliedResult struct {
	latest setters.Latest
	err    error
}

var _ setters.Lookup = (*clusterLookup)(nil)

func (l *clusterLookup) Policy(namespace, name string) (setters.Latest, error) {
	if l.fence != "" && namespace != l.fence {
		// Refused before reading: whether the policy exists is not told.
		return setters.Latest{}, fmt.Errorf("is in another namespace: a Sync outside the agent's namespace may use only the ImagePolicies of its own namespace, %s; "+
			"create the policy in %s and name it in the marker", l.fence, l.fence)
	}
	var p v1alpha1.ImagePolicy
	if err := l.client.Get(l.ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return setters.Latest{}, fmt.Errorf("%s/%s: %w", namespace, name, setters.ErrNoPolicy)
		}
		return setters.Latest{}, err
	}
	if p.Status.LatestTag == "" {
		if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			return setters.Latest{}, fmt.Errorf("has selected no tag yet: %s", c.Message)
		}
		return setters.Latest{}, fmt.Errorf("has selected no tag yet: %w", setters.ErrNotScanned)
	}
	return setters.Latest{Image: p.Spec.Image, Tag: p.Status.LatestTag, Digest: p.Status.LatestDigest}, nil
}

func (l *clusterLookup) Implied(p setters.Implied) (setters.Latest, error) {
	key := fmt.Sprintf("%+v", p.Spec)
	if r, ok := l.implied[key]; ok {
		return r.latest, r.err
	}
	latest, err := l.scanImplied(p)
	l.implied[key] = impliedResult{latest, err}
	return latest, err
}

func (l *clusterLookup) scanImplied(p setters.Implied) (setters.Latest, error) {
	compiled, err := policy.Compile(p.Spec)
	if err != nil {
		return setters.Latest{}, err
	}
	target := policy.Target{Image: p.Spec.Image}
	tags, err := l.scanner.List(l.ctx, target)
	if err != nil {
		return setters.Latest{}, err
	}
	d := compiled.Select(tags)
	if d.Tag == "" {
		return setters.Latest{}, errors.New("no tag of " + p.Spec.Image + " matches the annotation")
	}
	digest, err := l.scanner.Digest(l.ctx, target, d.Tag)
	if err != nil {
		return setters.Latest{}, err
	}
	return setters.Latest{Image: p.Spec.Image, Tag: d.Tag, Digest: digest}, nil
}
