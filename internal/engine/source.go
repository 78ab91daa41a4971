package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/render"
	"github.com/driftless/driftless/internal/source"
)

// SourceRequest builds the fetch request of s, reading its git Secret
// with reader. The error names the Secret, never its content.
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
	return req, nil
}

// Render checks out revision of the Sync's source into dir and renders
// its paths. On failure it also returns the Ready reason: FetchFailed or
// BuildFailed.
func Render(ctx context.Context, s *v1alpha1.Sync, req source.Request, revision, dir string, opts RenderOptions) ([]render.Object, string, error) {
	if _, err := source.Checkout(ctx, req, revision, dir); err != nil {
		return nil, v1alpha1.ReasonFetchFailed, err
	}
	objects, err := render.Render(opts.forSync(s, dir, revision))
	if err != nil {
		return nil, v1alpha1.ReasonBuildFailed, fmt.Errorf("revision %s: %w", source.Short(revision), err)
	}
	return objects, "", nil
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
	// Decrypt decrypts the files encrypted with SOPS (see
	// DecryptionKeys); nil decrypts nothing.
	Decrypt render.Decryptor
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
		Decrypt:         o.Decrypt,
	}
}
