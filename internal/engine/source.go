package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// SourceRequest builds the fetch request of s, reading its git Secret and
// the Secret of its trusted keys (spec.source.git.verify) with reader. The
// error names the Secret, never its content; FetchReason gives its Ready
// reason.
func SourceRequest(ctx context.Context, reader client.Reader, s *v1alpha1.Sync) (source.Request, error) {
	g := s.Spec.Source.Git
	req := source.Request{URL: g.URL, Ref: source.Ref{Branch: g.Branch, Tag: g.Tag, Commit: g.Commit}}
	if g.SecretRef != nil {
		var secret corev1.Secret
		key := client.ObjectKey{Namespace: s.Namespace, Name: g.SecretRef.Name}
		if err := reader.Get(ctx, key, &secret); err != nil {
			return req, fmt.Errorf("read git Secret %s: %w", key, err)
		}
		req.Credentials = source.CredentialsFromSecret(secret.Data)
	}
	req.Credentials.InsecureSkipHostKeyCheck = g.InsecureSkipHostKeyCheck
	if g.Verify != nil {
		v, err := verification(ctx, reader, s.Namespace, g.Verify)
		if err != nil {
			return req, err
		}
		req.Verify = v
	}
	return req, nil
}

// verification reads the trusted keys of v. A missing Secret, or one
// without a usable key, is a *source.VerificationError: nothing is
// applied until it is fixed.
func verification(ctx context.Context, reader client.Reader, namespace string, v *v1alpha1.GitVerification) (*source.Verification, error) {
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: v.SecretRef.Name}
	if err := reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &source.VerificationError{Err: fmt.Errorf("trusted keys Secret %s of spec.source.git.verify not found: "+
				"create it with an allowed_signers entry (OpenSSH allowed signers) or *.asc entries (armored OpenPGP public keys)", key)}
		}
		return nil, fmt.Errorf("read trusted keys Secret %s: %w", key, err)
	}
	keys, err := source.ParseTrustedKeys(secret.Name, secret.Data)
	if err != nil {
		return nil, err
	}
	mode := source.VerifyHEAD
	if v.Mode == v1alpha1.VerifyTag {
		mode = source.VerifyTag
	}
	return &source.Verification{Mode: mode, Keys: keys}, nil
}

// FetchReason is the Ready reason of an error of SourceRequest or of the
// checkout: VerificationFailed when the revision or the trusted keys were
// refused, else FetchFailed.
func FetchReason(err error) string {
	var ve *source.VerificationError
	if errors.As(err, &ve) {
		return v1alpha1.ReasonVerificationFailed
	}
	return v1alpha1.ReasonFetchFailed
}

// Render checks out revision of the Sync's source into dir and renders
// its paths. On failure it also returns the Ready reason: FetchFailed,
// VerificationFailed (nothing of the revision was read) or BuildFailed.
func Render(ctx context.Context, s *v1alpha1.Sync, req source.Request, revision, dir string, opts RenderOptions) ([]render.Object, string, error) {
	if _, err := source.Checkout(ctx, req, revision, dir); err != nil {
		return nil, FetchReason(err), err
	}
	objects, err := RenderTree(s, dir, revision, opts)
	if err != nil {
		return nil, v1alpha1.ReasonBuildFailed, err
	}
	return objects, "", nil
}

// RenderTree renders the Sync's paths in dir, a checkout of revision (see
// source.Mirror). The error is a BuildFailed one.
func RenderTree(s *v1alpha1.Sync, dir, revision string, opts RenderOptions) ([]render.Object, error) {
	objects, err := render.Render(opts.forSync(s, dir, revision))
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", source.Short(revision), err)
	}
	return objects, nil
}

// RenderDir renders the Sync's paths in dir, a local checkout of its
// repository, as Render renders them from git, without a revision: the
// origins of the objects match those of a commit of the same files.
func RenderDir(s *v1alpha1.Sync, dir string, opts RenderOptions) ([]render.Object, error) {
	return render.Render(opts.forSync(s, dir, ""))
}

// RenderOptions are the render settings that are the agent's, not the
// Sync's.
type RenderOptions struct {
	// Scope tells render which kinds are namespaced. Required.
	Scope render.ScopeResolver
	// Budgets bound one render; the zero value is render.DefaultBudgets.
	Budgets render.Budgets
	// Variables are the Sync's variables (see Variables); nil substitutes
	// nothing.
	Variables map[string]render.Variable
}

func (o RenderOptions) forSync(s *v1alpha1.Sync, dir, revision string) render.Options {
	return render.Options{
		Root:            dir,
		Paths:           s.Spec.Paths,
		Revision:        revision,
		SyncLabel:       s.LabelValue(),
		TargetNamespace: s.Spec.TargetNamespace,
		Scope:           o.Scope,
		Budgets:         o.Budgets,
		Kustomize:       render.KustomizeOptions{AllowRemote: s.Spec.Kustomize != nil && s.Spec.Kustomize.AllowRemote},
		Variables:       o.Variables,
	}
}
